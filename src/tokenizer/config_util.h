// Small readers shared by the tokenizer loaders: JSON files, special-token
// fields of tokenizer_config.json, base64.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx::tokenizer_config {

// Parses a JSON file; throws InvalidArgument naming the file on failure.
nlohmann::json read_json(const std::filesystem::path& path);

// A special-token field: "text" or {"content": "text", ...}; nullopt if absent/null.
std::optional<std::string> token_string(const nlohmann::json& config, const char* key);

// eos_token_id of generation_config.json / config.json: an int or a list.
std::vector<int32_t> eos_token_ids(const nlohmann::json& config);

std::string base64_decode(std::string_view text);  // throws InvalidArgument on bad input

}  // namespace mx::tokenizer_config
