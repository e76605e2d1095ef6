#include "server/field_reader.h"

#include <cmath>

#include "server/api_error.h"

namespace mx {

nlohmann::json error_body(int status, const std::string& type, const std::string& message, const std::string& param,
                          const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  else e["code"] = status;
  return {{"error", e}};
}

FieldReader::FieldReader(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) bad_request("", "{} must be a JSON object", where_);
}

std::string FieldReader::path(const std::string& name) const {
  return where_ == "request" ? name : where_ + "." + name;
}

const nlohmann::json* FieldReader::lookup(const std::string& name) {
  known_.insert(name);
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> FieldReader::string(const std::string& name) {
  const auto* v = lookup(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_request(path(name), "'{}' must be a string, got {}", path(name), v->type_name());
  return v->get<std::string>();
}

std::optional<bool> FieldReader::boolean(const std::string& name) {
  const auto* v = lookup(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_request(path(name), "'{}' must be a boolean, got {}", path(name), v->type_name());
  return v->get<bool>();
}

std::optional<int64_t> FieldReader::integer(const std::string& name, int64_t min, int64_t max) {
  const auto* v = lookup(name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) bad_request(path(name), "'{}' is too large", path(name));
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() && std::abs(v->get<double>()) < 9e15) {
    x = int64_t(v->get<double>());
  } else {
    bad_request(path(name), "'{}' must be an integer, got {}", path(name), v->dump());
  }
  if (x < min || x > max) bad_request(path(name), "'{}' must be between {} and {}, got {}", path(name), min, max, x);
  return x;
}

std::optional<double> FieldReader::number(const std::string& name) {
  const auto* v = lookup(name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_request(path(name), "'{}' must be a number, got {}", path(name), v->type_name());
  const double x = v->get<double>();
  if (!std::isfinite(x)) bad_request(path(name), "'{}' must be finite", path(name));
  return x;
}

const nlohmann::json* FieldReader::raw(const std::string& name) { return lookup(name); }

void FieldReader::reject_unknown() const {
  for (const auto& [key, value] : object_.items())
    if (!known_.count(key)) bad_request(path(key), "unknown field '{}' in {}; this server does not support it", key, where_);
}

}  // namespace mx
