#include <algorithm>

#include "core/error.h"
#include "tokenizer/config_util.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx {
namespace {

// Wraps a tokenizer to add EOS ids that model-level configs declare.
class ExtraEosTokenizer final : public Tokenizer {
 public:
  ExtraEosTokenizer(std::unique_ptr<Tokenizer> inner, std::vector<int32_t> eos) : inner_(std::move(inner)), eos_(std::move(eos)) {}
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override { return inner_->encode(text, allow_special); }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override { return inner_->decode(ids, skip_special); }
  std::string token_bytes(int32_t id) const override { return inner_->token_bytes(id); }
  std::optional<int32_t> token_to_id(std::string_view token) const override { return inner_->token_to_id(token); }
  int32_t vocab_size() const override { return inner_->vocab_size(); }
  bool is_special(int32_t id) const override { return inner_->is_special(id); }
  std::optional<int32_t> bos_id() const override { return inner_->bos_id(); }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  bool add_bos() const override { return inner_->add_bos(); }

 private:
  std::unique_ptr<Tokenizer> inner_;
  std::vector<int32_t> eos_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir_or_file) {
  namespace fs = std::filesystem;
  const fs::path& p = model_dir_or_file;
  if (!fs::exists(p)) fail_input("tokenizer path {} does not exist", p.string());
  if (!fs::is_directory(p)) {
    if (p.extension() == ".gguf") return load_gguf_tokenizer(p);
    if (p.filename() == "tokenizer.json") return load_tokenizer(p.parent_path());
    if (p.extension() == ".model" || p.extension() == ".tiktoken") {
      fs::path config = p.parent_path() / "tokenizer_config.json";
      return load_tiktoken_tokenizer(p, fs::exists(config) ? config : fs::path());
    }
    fail_input("{}: not a tokenizer file (tokenizer.json, tiktoken.model) or directory", p.string());
  }
  fs::path config = p / "tokenizer_config.json";
  fs::path config_arg = fs::exists(config) ? config : fs::path();
  std::unique_ptr<Tokenizer> tok;
  if (fs::exists(p / "tokenizer.json")) {
    tok = load_hf_tokenizer(p / "tokenizer.json", config_arg);
  } else if (fs::exists(p / "tiktoken.model")) {
    tok = load_tiktoken_tokenizer(p / "tiktoken.model", config_arg);
  } else {
    fail_input("{}: no tokenizer.json or tiktoken.model", p.string());
  }
  // Model-level configs may name more ids that end a turn.
  std::vector<int32_t> eos = tok->eos_ids();
  bool added = false;
  for (const char* name : {"generation_config.json", "config.json"}) {
    if (!fs::exists(p / name)) continue;
    for (int32_t id : tokenizer_config::eos_token_ids(tokenizer_config::read_json(p / name))) {
      if (id < 0 || id >= tok->vocab_size() || std::find(eos.begin(), eos.end(), id) != eos.end()) continue;
      eos.push_back(id);
      added = true;
    }
  }
  if (!added) return tok;
  return std::make_unique<ExtraEosTokenizer>(std::move(tok), std::move(eos));
}

}  // namespace mx
