#include "tokenizer/config_util.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mx::tokenizer_config {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot open {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail_input("{} is not valid JSON: {}", path.string(), e.what());
  }
}

std::optional<std::string> token_string(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail_input("tokenizer config field '{}' is neither a string nor {{\"content\": ...}}", key);
}

std::vector<int32_t> eos_token_ids(const nlohmann::json& config) {
  std::vector<int32_t> ids;
  auto it = config.find("eos_token_id");
  if (it == config.end()) return ids;
  if (it->is_number_integer()) ids.push_back(it->get<int32_t>());
  if (it->is_array())
    for (const auto& v : *it)
      if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
  return ids;
}

std::string base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    int v = value(c);
    if (v < 0) fail_input("invalid base64 character '{}' in '{}'", c, text);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace mx::tokenizer_config
