// load_tokenizer for a .gguf file: reads tokenizer.ggml.* with io's GGUF
// reader and builds the tokenizer with make_bpe_from_gguf_vocab.
#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"

namespace mx {

GgufVocab read_gguf_vocab(const GgufFile& f) {
  GgufVocab v;
  v.model = f.get_string_or("tokenizer.ggml.model", "gpt2");
  v.pre = f.get_string_or("tokenizer.ggml.pre", "default");
  v.tokens = f.get_strings("tokenizer.ggml.tokens");
  if (f.find("tokenizer.ggml.merges")) v.merges = f.get_strings("tokenizer.ggml.merges");
  if (f.find("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_ints("tokenizer.ggml.token_type")) v.token_types.push_back(static_cast<int32_t>(t));
  auto id = [&](const char* key) -> std::optional<int32_t> {
    if (!f.find(key)) return std::nullopt;
    return static_cast<int32_t>(f.get_int(key));
  };
  v.bos_id = id("tokenizer.ggml.bos_token_id");
  v.eos_id = id("tokenizer.ggml.eos_token_id");
  v.eot_id = id("tokenizer.ggml.eot_token_id");
  v.unknown_id = id("tokenizer.ggml.unknown_token_id");
  if (f.find("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", false);
  return v;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf_file) {
  return make_bpe_from_gguf_vocab(read_gguf_vocab(*GgufFile::open(gguf_file)));
}

}  // namespace mx
