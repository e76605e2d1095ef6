// Tokenizer = added tokens + pre-tokenizer + byte-level BPE model. The loaders
// (tiktoken.model, tokenizer.json, GGUF vocabulary) all build one of these.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx {

struct BpeTokenizerParts {
  BpeModel model;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added_tokens;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  bool add_bos = false;
  // Vocabulary names are GPT-2 byte-level strings (HF, GGUF) rather than raw
  // bytes (tiktoken): token_to_id converts through the byte map.
  bool byte_level_names = false;
  // Kimi's encode wrapper: encode in chunks of at most this many code points,
  // and cut runs of more than max_run code points that are all Python-space or
  // all non-space (0 = off).
  size_t chunk_code_points = 0;
  size_t max_run_code_points = 0;
  // HF normalizer NFC: applied to the text between added tokens before splitting.
  bool nfc = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerParts parts);

  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  bool is_special(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return p_.bos_id; }
  std::vector<int32_t> eos_ids() const override { return p_.eos_ids; }
  bool add_bos() const override { return p_.add_bos; }

 private:
  void encode_chunk(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
  const AddedToken* added_token(int32_t id) const;

  BpeTokenizerParts p_;
  AddedTokenMatcher matcher_;
  std::vector<int32_t> added_index_;  // id -> index into matcher_.tokens(), -1 if none
  int32_t vocab_size_ = 0;
};

}  // namespace mx
