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
// EOS ids are the config's eos_token plus the eos_token_id(s) of
// generation_config.json / config.json when present, plus <|im_end|> for
// tiktoken (Kimi) vocabularies: every id that ends a turn.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir_or_file);

// tiktoken rank file (`base64 rank` lines, ranks 0..n-1) with Kimi's
// pre-tokenizer and its 256 reserved special ids n..n+255, named from
// tokenizer_config.json's added_tokens_decoder (else `<|reserved_token_<id>|>`).
// tokenizer_config may be empty (no names, no BOS/EOS).
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::filesystem::path& tiktoken_model,
                                                   const std::filesystem::path& tokenizer_config);

// HF tokenizer.json with a byte-level BPE model; tokenizer_config may be empty.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json,
                                             const std::filesystem::path& tokenizer_config);

// A GGUF file's tokenizer metadata (`tokenizer.ggml.*`), as the GGUF reader
// extracts it; make_bpe_from_gguf_vocab builds the tokenizer.
struct GgufVocab {
  std::string model = "gpt2";            // tokenizer.ggml.model (only "gpt2" is byte-level BPE)
  std::string pre = "default";           // tokenizer.ggml.pre: names the pre-tokenizer regex
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens, GPT-2 byte-to-unicode form
  std::vector<std::string> merges;       // tokenizer.ggml.merges, "left right"
  std::vector<int32_t> token_types;      // tokenizer.ggml.token_type (1 normal, 2 unknown,
                                         // 3 control, 4 user-defined, 5 unused, 6 byte); may be empty
  std::optional<int32_t> bos_id;         // tokenizer.ggml.bos_token_id
  std::optional<int32_t> eos_id;         // tokenizer.ggml.eos_token_id
  std::optional<int32_t> eot_id;         // tokenizer.ggml.eot_token_id (also ends a turn)
  std::optional<int32_t> unknown_id;     // tokenizer.ggml.unknown_token_id
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token (absent: false, as llama.cpp does for gpt2 vocabularies)
};
// Control tokens become special tokens (matched only when allowed), user-defined
// ones added tokens matched always; throws InvalidArgument for a non-gpt2 model,
// an unknown `pre` name, or tokens/merges that do not fit together.
std::unique_ptr<Tokenizer> make_bpe_from_gguf_vocab(const GgufVocab& vocab);

}  // namespace mx
