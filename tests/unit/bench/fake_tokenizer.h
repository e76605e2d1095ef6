// Test tokenizers for the bench layer (the real ones live in src/tokenizer).
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mx::bench::testing {

// Ids 0..25 are the letters a..z; 26..39 decode to two letters; 40..49 decode
// to nothing. Encoding maps each letter to its id, so a decode/encode round
// trip changes lengths in both directions, like real BPE vocabularies do.
class LetterTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (char c : text)
      if (c >= 'a' && c <= 'z') ids.push_back(c - 'a');
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 26) return std::string(1, char('a' + id));
    if (id < 40) return std::string{char('a' + id - 26), char('z' - (id - 26))};
    return "";
  }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  int32_t vocab_size() const override { return 50; }
  bool is_special(int32_t) const override { return false; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::vector<int32_t> eos_ids() const override { return {}; }
  bool add_bos() const override { return false; }
};

// Every id decodes to " <id>" and encodes back exactly: the round trip never
// changes anything, so the ids of a prompt can be read back from its text.
class NumberTokenizer : public Tokenizer {
 public:
  explicit NumberTokenizer(int32_t vocab) : vocab_(vocab) {}
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while ((pos = text.find(' ', pos)) != std::string_view::npos) {
      ++pos;
      ids.push_back(int32_t(std::stol(std::string(text.substr(pos, text.find(' ', pos) - pos)))));
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int32_t id) const override { return " " + std::to_string(id); }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  int32_t vocab_size() const override { return vocab_; }
  bool is_special(int32_t) const override { return false; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::vector<int32_t> eos_ids() const override { return {}; }
  bool add_bos() const override { return false; }

 private:
  int32_t vocab_;
};

}  // namespace mx::bench::testing
