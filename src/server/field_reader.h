// Reads a JSON request object field by field with type checks, remembering
// which fields were read, so that fields the server does not understand are
// rejected instead of silently ignored. A null value counts as absent.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace mx {

class FieldReader {
 public:
  // `where` names the object in messages ("request", "messages[2]").
  FieldReader(const nlohmann::json& object, std::string where);

  std::optional<std::string> string(const std::string& name);
  std::optional<bool> boolean(const std::string& name);
  std::optional<int64_t> integer(const std::string& name, int64_t min, int64_t max);
  std::optional<double> number(const std::string& name);
  // Any type; the caller checks it. Returns nullptr when absent or null.
  const nlohmann::json* raw(const std::string& name);
  // Accepted and deliberately unused (OpenAI's `user`).
  void ignore(const std::string& name) { known_.insert(name); }
  // Throws a 400 for the first field that was not read.
  void reject_unknown() const;

 private:
  const nlohmann::json* lookup(const std::string& name);
  std::string path(const std::string& name) const;

  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string> known_;
};

}  // namespace mx
