#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/config_util.h"
#include "tokenizer/jinja_eval.h"

namespace mx {
namespace {

// Renders like transformers' apply_chat_template: variables messages, tools
// (None when absent), documents (None), add_generation_prompt, bos_token,
// eos_token, then the caller's extra variables.
class JinjaChatTemplate final : public ChatTemplate {
 public:
  JinjaChatTemplate(const std::string& source, std::string bos, std::string eos)
      : template_(source), bos_(std::move(bos)), eos_(std::move(eos)) {}

  std::string render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                     const nlohmann::json& extra) const override {
    return render_ordered(nlohmann::ordered_json(messages), nlohmann::ordered_json(tools), add_generation_prompt,
                          nlohmann::ordered_json(extra));
  }

  std::string render_ordered(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt, const nlohmann::ordered_json& extra) const override {
    using jinja::Value;
    jinja::Dict vars;
    auto set = [&](const std::string& k, Value v) {
      for (auto& [name, old] : vars)
        if (name == k) {
          old = std::move(v);
          return;
        }
      vars.emplace_back(k, std::move(v));
    };
    set("messages", Value::from_json(messages));
    set("tools", Value::from_json(tools));
    set("documents", Value::none());
    set("add_generation_prompt", Value::boolean(add_generation_prompt));
    set("bos_token", Value::string(bos_));
    set("eos_token", Value::string(eos_));
    if (extra.is_object())
      for (const auto& [k, v] : extra.items()) set(k, Value::from_json(v));
    else if (!extra.is_null())
      fail_input("chat template extra variables must be a JSON object, got {}", extra.type_name());
    return template_.render(vars);
  }

 private:
  jinja::Template template_;
  std::string bos_, eos_;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail_input("cannot open {}", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::unique_ptr<ChatTemplate> parse_chat_template(const std::string& source, const std::string& bos_token,
                                                  const std::string& eos_token) {
  return std::make_unique<JinjaChatTemplate>(source, bos_token, eos_token);
}

std::unique_ptr<ChatTemplate> load_chat_template(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  nlohmann::json config = nlohmann::json::object();
  if (fs::exists(model_dir / "tokenizer_config.json")) config = tokenizer_config::read_json(model_dir / "tokenizer_config.json");
  std::string bos = tokenizer_config::token_string(config, "bos_token").value_or("");
  std::string eos = tokenizer_config::token_string(config, "eos_token").value_or("");
  std::optional<std::string> source;
  if (auto it = config.find("chat_template"); it != config.end()) {
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {
      // Named templates: [{"name": "default", "template": "..."}, ...]
      for (const auto& entry : *it) {
        // Non-string fields are skipped (json::value would throw type_error).
        if (!entry.is_object()) continue;
        const auto name = entry.find("name"), text = entry.find("template");
        if (name != entry.end() && name->is_string() && *name == "default" && text != entry.end() && text->is_string())
          source = text->get<std::string>();
      }
    }
  }
  if (!source && fs::exists(model_dir / "chat_template.jinja")) source = read_file(model_dir / "chat_template.jinja");
  if (!source) return nullptr;
  return parse_chat_template(*source, bos, eos);
}

}  // namespace mx
