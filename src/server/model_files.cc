#include "server/model_files.h"

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace mx {

namespace fs = std::filesystem;

namespace {

GgufVocab read_gguf_vocab(const GgufFile& f) {
  GgufVocab v;
  v.model = f.get_string_or("tokenizer.ggml.model", "gpt2");
  v.pre = f.get_string_or("tokenizer.ggml.pre", "default");
  v.tokens = f.get_strings("tokenizer.ggml.tokens");
  if (f.find("tokenizer.ggml.merges")) v.merges = f.get_strings("tokenizer.ggml.merges");
  if (f.find("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_ints("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
  auto id = [&](const char* key) -> std::optional<int32_t> {
    if (!f.find(key)) return std::nullopt;
    return int32_t(f.get_int(key));
  };
  v.bos_id = id("tokenizer.ggml.bos_token_id");
  v.eos_id = id("tokenizer.ggml.eos_token_id");
  v.eot_id = id("tokenizer.ggml.eot_token_id");
  v.unknown_id = id("tokenizer.ggml.unknown_token_id");
  if (f.find("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", false);
  return v;
}

// The GGUF holding the tokenizer, if the model is (or carries) one.
std::optional<fs::path> tokenizer_gguf(const fs::path& model) {
  if (is_gguf_file(model)) return model;
  if (fs::is_directory(model) && is_gguf_file(model / "tokenizer.gguf")) return model / "tokenizer.gguf";
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Tokenizer> load_model_tokenizer(const fs::path& model) {
  if (auto gguf = tokenizer_gguf(model)) return make_bpe_from_gguf_vocab(read_gguf_vocab(*GgufFile::open(*gguf)));
  return load_tokenizer(model);
}

std::unique_ptr<ChatTemplate> load_model_chat_template(const fs::path& model) {
  if (fs::is_directory(model))
    if (auto t = load_chat_template(model)) return t;
  if (auto gguf = tokenizer_gguf(model)) {
    GgufChatTemplateSource t = gguf_chat_template(*GgufFile::open(*gguf));
    if (!t.source.empty()) return parse_chat_template(t.source, t.bos_token, t.eos_token);
  }
  return nullptr;
}

}  // namespace mx
