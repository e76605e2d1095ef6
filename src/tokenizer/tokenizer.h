// Text <-> token ids, exactly as the reference tokenizers do it (tiktoken for
// Kimi's tiktoken.model, HF tokenizers for tokenizer.json, llama.cpp for GGUF
// vocabularies). Byte-level BPE underneath.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mx {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // allow_special: special-token strings in the text become their ids;
  // otherwise they are encoded as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // The raw bytes one token stands for (may be a partial UTF-8 sequence).
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::vector<int32_t> eos_ids() const = 0;  // every id that ends a turn
  virtual bool add_bos() const = 0;                  // prepend BOS when encoding a prompt
};

// Finds the tokenizer in a model directory: tiktoken.model (+ tokenizer_config.json),
// tokenizer.json (+ tokenizer_config.json), or a *.gguf file's metadata.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir_or_file);

}  // namespace mx
