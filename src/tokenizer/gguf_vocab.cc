// GGUF "gpt2" vocabularies (tokenizer.ggml.*) -> BpeTokenizer.
#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_unicode.h"

namespace mx {
namespace {

enum GgufTokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

std::pair<std::string, std::string> split_merge(const std::string& merge, size_t index) {
  size_t space = merge.find(' ', 1);  // a merge's left side is never empty
  if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos)
    fail_input("GGUF merge {} '{}' is not 'left right'", index, merge);
  auto left = byte_unicode::decode(merge.substr(0, space));
  auto right = byte_unicode::decode(merge.substr(space + 1));
  if (!left || !right) fail_input("GGUF merge {} '{}' has a character outside the byte map", index, merge);
  return {*left, *right};
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_from_gguf_vocab(const GgufVocab& vocab) {
  if (vocab.model != "gpt2")
    fail_input("GGUF tokenizer model '{}' is not supported (only 'gpt2' byte-level BPE)", vocab.model);
  if (!vocab.token_types.empty() && vocab.token_types.size() != vocab.tokens.size())
    fail_input("GGUF vocabulary has {} tokens but {} token types", vocab.tokens.size(), vocab.token_types.size());
  size_t n = vocab.tokens.size();
  auto check_id = [&](const std::optional<int32_t>& id, const char* what) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n))
      fail_input("GGUF {} {} is outside the vocabulary of {} tokens", what, *id, n);
  };
  check_id(vocab.bos_id, "bos_token_id");
  check_id(vocab.eos_id, "eos_token_id");
  check_id(vocab.eot_id, "eot_token_id");
  check_id(vocab.unknown_id, "unknown_token_id");

  BpeTokenizerParts parts;
  std::vector<std::optional<std::string>> bpe_vocab(n);
  for (size_t i = 0; i < n; ++i) {
    int type = vocab.token_types.empty() ? kNormal : vocab.token_types[i];
    if (type == kControl || type == kUserDefined) {
      AddedToken t;
      t.content = vocab.tokens[i];
      t.id = static_cast<int32_t>(i);
      t.special = type == kControl;
      t.matched_always = type == kUserDefined;
      parts.added_tokens.push_back(std::move(t));
      continue;
    }
    auto bytes = byte_unicode::decode(vocab.tokens[i]);
    if (!bytes) {
      if (type == kUnused || type == kUnknown) continue;  // placeholders need no bytes
      fail_input("GGUF token {} '{}' has a character outside the GPT-2 byte map", i, vocab.tokens[i]);
    }
    bpe_vocab[i] = std::move(*bytes);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) merges.push_back(split_merge(vocab.merges[i], i));

  // Llama-3 vocabularies emit a piece that is a whole token as is (HF's
  // ignore_merges, which llama.cpp applies for these pre-tokenizer names).
  bool ignore_merges = vocab.pre == "llama-bpe" || vocab.pre == "llama3" || vocab.pre == "llama-v3";
  parts.model = BpeModel::from_merges(std::move(bpe_vocab), merges, ignore_merges, vocab.unknown_id);
  parts.pre_tokenizer = pretokenizer_for_gguf_pre(vocab.pre);
  parts.byte_level_names = true;
  parts.bos_id = vocab.bos_id;
  if (vocab.eos_id) parts.eos_ids.push_back(*vocab.eos_id);
  if (vocab.eot_id && vocab.eot_id != vocab.eos_id) parts.eos_ids.push_back(*vocab.eot_id);
  parts.add_bos = vocab.add_bos.value_or(false) && vocab.bos_id.has_value();
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace mx
