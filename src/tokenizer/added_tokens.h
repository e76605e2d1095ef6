// Added/special tokens: strings that are cut out of the text before the
// pre-tokenizer and map straight to one id. Matching is leftmost-longest (HF's
// added-vocabulary rule; tiktoken's specials never overlap in practice).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mx {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = true;          // skipped by decode(skip_special), reported by is_special
  bool matched_always = false;  // HF non-special added tokens: cut out even when specials are not allowed
  bool lstrip = false;          // HF: absorb whitespace on the left of the match
  bool rstrip = false;          // HF: absorb whitespace on the right of the match
};

class AddedTokenMatcher {
 public:
  struct Match {
    size_t begin, end;  // the span removed from the text (incl. stripped whitespace)
    const AddedToken* token;
  };
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens = {});
  // First match at or after `from` (not reaching back before `floor` when lstrip
  // absorbs whitespace); allow_special=false only considers matched_always tokens.
  std::optional<Match> find(std::string_view text, size_t from, bool allow_special) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices, longest first
};

}  // namespace mx
