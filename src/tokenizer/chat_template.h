// Renders a model's own Jinja chat_template (from tokenizer_config.json,
// chat_template.jinja, or GGUF metadata) with the Jinja subset these templates
// use. Output must equal Python jinja2's rendering of the same template.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace mx {

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // messages: OpenAI-style [{role, content, tool_calls?, tool_call_id?, name?}];
  // tools: OpenAI tool list or null; extra: additional template variables
  // (e.g. {"thinking": false}). Throws mx::InvalidArgument for template errors
  // (raise_exception, unknown constructs) with the template's message.
  virtual std::string render(const nlohmann::json& messages, const nlohmann::json& tools,
                             bool add_generation_prompt, const nlohmann::json& extra = nullptr) const = 0;
  // Same, keeping the objects' key order: `tools | tojson` then prints keys in
  // the order the client sent them, as Python does (nlohmann::json sorts keys).
  // The server should parse requests as ordered_json and call this one.
  virtual std::string render_ordered(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& extra = nullptr) const = 0;
};

// Parses a template source once; bos/eos token strings become template vars.
std::unique_ptr<ChatTemplate> parse_chat_template(const std::string& source, const std::string& bos_token,
                                                  const std::string& eos_token);
// From a model directory: tokenizer_config.json's chat_template, else chat_template.jinja.
// Returns nullptr when the directory has none.
std::unique_ptr<ChatTemplate> load_chat_template(const std::filesystem::path& model_dir);

}  // namespace mx
