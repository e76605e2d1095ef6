#include "server/model_files.h"

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenizer/gguf_tokenizer.h"

namespace mx {

namespace fs = std::filesystem;

namespace {

// The GGUF holding the tokenizer, if the model is (or carries) one.
std::optional<fs::path> tokenizer_gguf(const fs::path& model) {
  if (is_gguf_file(model)) return model;
  if (fs::is_directory(model) && is_gguf_file(model / "tokenizer.gguf")) return model / "tokenizer.gguf";
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Tokenizer> load_model_tokenizer(const fs::path& model) {
  if (auto gguf = tokenizer_gguf(model)) return load_gguf_tokenizer(*gguf);
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
