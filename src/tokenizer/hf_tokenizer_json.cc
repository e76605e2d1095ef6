// HF tokenizer.json (byte-level BPE) -> BpeTokenizer. Supported pieces are the
// ones byte-level models use: model BPE; pre_tokenizer ByteLevel / Split /
// Digits / Sequence of them; normalizer none; decoder ByteLevel; added_tokens.
// Anything else is refused by name rather than silently tokenized differently.
#include <map>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/config_util.h"

namespace mx {
namespace {

using nlohmann::json;

std::string bytes_of_name(const std::string& name, const char* what) {
  auto bytes = byte_unicode::decode(name);
  if (!bytes) fail_input("tokenizer.json: {} '{}' is not a byte-level token", what, name);
  return *bytes;
}

std::pair<std::string, std::string> parse_merge(const json& merge, size_t index) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {bytes_of_name(merge[0], "merge"), bytes_of_name(merge[1], "merge")};
  if (merge.is_string()) {
    std::string s = merge;
    size_t space = s.find(' ', 1);
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {bytes_of_name(s.substr(0, space), "merge"), bytes_of_name(s.substr(space + 1), "merge")};
  }
  fail_input("tokenizer.json: merge {} is neither \"a b\" nor [\"a\", \"b\"]: {}", index, merge.dump());
}

std::string split_pattern(const json& step) {
  const json& pattern = step.at("pattern");
  if (pattern.contains("Regex")) return pattern["Regex"].get<std::string>();
  if (pattern.contains("String")) {
    // A literal: quote it for PCRE2.
    return "\\Q" + pattern["String"].get<std::string>() + "\\E";
  }
  fail_input("tokenizer.json: Split pattern {} is neither Regex nor String", pattern.dump());
}

struct PreTokenizerBuild {
  PreTokenizer pre;
  bool byte_level = false;
  bool add_prefix_space = false;
};

void add_pre_step(const json& step, PreTokenizerBuild& out, bool first) {
  std::string type = step.value("type", "");
  if (type == "Sequence") {
    bool is_first = first;
    for (const auto& s : step.at("pretokenizers")) {
      add_pre_step(s, out, is_first);
      is_first = false;
    }
  } else if (type == "ByteLevel") {
    out.byte_level = true;
    if (step.value("add_prefix_space", false)) {
      if (!first) fail_input("tokenizer.json: ByteLevel add_prefix_space=true after another pre-tokenizer is not supported");
      out.add_prefix_space = true;
    }
    if (step.value("use_regex", true)) out.pre.add_step(patterns::kGpt2, SplitBehavior::kIsolated);
  } else if (type == "Split") {
    if (step.value("invert", false)) fail_input("tokenizer.json: Split with invert=true is not supported");
    std::string behavior = step.value("behavior", "Isolated");
    SplitBehavior b;
    if (behavior == "Isolated") b = SplitBehavior::kIsolated;
    else if (behavior == "Removed") b = SplitBehavior::kRemoved;
    else fail_input("tokenizer.json: Split behavior '{}' is not supported (Isolated, Removed)", behavior);
    out.pre.add_step(split_pattern(step), b);
  } else if (type == "Digits") {
    out.pre.add_step(step.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::kIsolated);
  } else {
    fail_input("tokenizer.json: pre_tokenizer type '{}' is not supported (ByteLevel, Split, Digits, Sequence)", type);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json,
                                             const std::filesystem::path& tokenizer_config_path) {
  json tj = tokenizer_config::read_json(tokenizer_json);
  json config = tokenizer_config_path.empty() ? json::object() : tokenizer_config::read_json(tokenizer_config_path);
  const json& model = tj.at("model");
  if (model.value("type", "BPE") != "BPE")
    fail_input("{}: model type '{}' is not supported (only byte-level BPE)", tokenizer_json.string(),
               model.value("type", ""));
  if (model.value("byte_fallback", false)) fail_input("{}: BPE byte_fallback is not supported", tokenizer_json.string());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      fail_input("{}: BPE {} is not supported", tokenizer_json.string(), key);
  bool use_nfc = false;
  if (tj.contains("normalizer") && !tj["normalizer"].is_null()) {
    std::string type = tj["normalizer"].value("type", "?");
    if (type != "NFC") fail_input("{}: normalizer '{}' is not supported (only none and NFC)", tokenizer_json.string(), type);
    use_nfc = true;
  }

  PreTokenizerBuild pre;
  if (tj.contains("pre_tokenizer") && !tj["pre_tokenizer"].is_null()) add_pre_step(tj["pre_tokenizer"], pre, true);
  if (tj.contains("decoder") && !tj["decoder"].is_null()) {
    std::string type = tj["decoder"].value("type", "");
    if (type != "ByteLevel") fail_input("{}: decoder '{}' is not supported (only ByteLevel)", tokenizer_json.string(), type);
    pre.byte_level = true;
  }
  if (!pre.byte_level) fail_input("{}: not a byte-level BPE (no ByteLevel pre-tokenizer or decoder)", tokenizer_json.string());
  if (pre.add_prefix_space) fail_input("{}: ByteLevel add_prefix_space=true is not supported", tokenizer_json.string());

  // Vocabulary and added tokens share the id space.
  std::map<int32_t, std::string> names;
  for (const auto& [name, id] : model.at("vocab").items()) names[id.get<int32_t>()] = name;
  int32_t size = names.empty() ? 0 : names.rbegin()->first + 1;
  std::vector<AddedToken> added;
  for (const auto& a : tj.value("added_tokens", json::array())) {
    AddedToken t;
    t.id = a.at("id").get<int32_t>();
    t.content = a.at("content").get<std::string>();
    t.special = a.value("special", false);
    t.matched_always = !t.special;
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    added.push_back(std::move(t));
  }
  std::unordered_set<int32_t> added_ids;
  for (const auto& t : added) added_ids.insert(t.id);
  std::vector<std::optional<std::string>> vocab(size);
  for (auto& [id, name] : names) {
    if (id < 0) fail_input("{}: negative id {} for '{}'", tokenizer_json.string(), id, name);
    if (added_ids.count(id)) continue;  // the added token's content is what decodes
    vocab[id] = bytes_of_name(name, "vocab token");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& merge_list = model.value("merges", json::array());
  merges.reserve(merge_list.size());
  for (size_t i = 0; i < merge_list.size(); ++i) merges.push_back(parse_merge(merge_list[i], i));
  std::optional<int32_t> unk;
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = model.at("vocab").find(model["unk_token"].get<std::string>());
    if (it != model.at("vocab").end()) unk = it->get<int32_t>();
  }

  BpeTokenizerParts parts;
  parts.model = BpeModel::from_merges(std::move(vocab), merges, model.value("ignore_merges", false), unk);
  parts.pre_tokenizer = std::move(pre.pre);
  parts.byte_level_names = true;
  parts.nfc = use_nfc;
  auto id_of = [&](const std::string& content) -> std::optional<int32_t> {
    for (const auto& t : added)
      if (t.content == content) return t.id;
    auto it = names.begin();
    for (; it != names.end(); ++it)
      if (it->second == content) return it->first;
    return std::nullopt;
  };
  parts.added_tokens = std::move(added);
  if (auto bos = tokenizer_config::token_string(config, "bos_token")) parts.bos_id = id_of(*bos);
  if (auto eos = tokenizer_config::token_string(config, "eos_token"))
    if (auto id = id_of(*eos)) parts.eos_ids.push_back(*id);
  // BOS: tokenizer_config's add_bos_token, else the post-processor's template
  // (Llama-3: TemplateProcessing "single" starting with <|begin_of_text|>).
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    parts.add_bos = config["add_bos_token"].get<bool>() && parts.bos_id.has_value();
  } else if (tj.contains("post_processor") && tj["post_processor"].is_object()) {
    const json& pp = tj["post_processor"];
    const json* tp = &pp;
    if (pp.value("type", "") == "Sequence")
      for (const auto& p : pp.value("processors", json::array()))
        if (p.value("type", "") == "TemplateProcessing") tp = &p;
    if (tp->value("type", "") == "TemplateProcessing" && tp->contains("single") && !(*tp)["single"].empty()) {
      const json& first = (*tp)["single"][0];
      if (first.contains("SpecialToken")) {
        std::string name = first["SpecialToken"].at("id");
        if (auto id = id_of(name)) {
          parts.bos_id = parts.bos_id.value_or(*id);
          parts.add_bos = true;
        }
      }
    }
  }
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace mx
