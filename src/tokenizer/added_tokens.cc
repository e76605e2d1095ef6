#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace mx {
namespace {

// Length of the whitespace code point ending at text[end-1], or 0.
size_t space_before(std::string_view text, size_t end) {
  size_t b = end;
  while (b > 0 && (static_cast<unsigned char>(text[b - 1]) & 0xC0) == 0x80) --b;
  if (b == 0) return 0;
  --b;
  size_t n = utf8::valid_sequence_length(text, b);
  if (n != end - b) return 0;
  return utf8::is_python_space(utf8::decode_at(text, b, n)) ? n : 0;
}

size_t space_at(std::string_view text, size_t i) {
  if (i >= text.size()) return 0;
  size_t n = utf8::valid_sequence_length(text, i);
  if (n == 0) return 0;
  return utf8::is_python_space(utf8::decode_at(text, i, n)) ? n : 0;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                bool allow_special) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    for (uint32_t idx : candidates) {
      const AddedToken& t = tokens_[idx];
      if (!allow_special && !t.matched_always) continue;
      if (text.compare(pos, t.content.size(), t.content) != 0) continue;
      size_t begin = pos, end = pos + t.content.size();
      if (t.lstrip)
        while (size_t n = begin > from ? space_before(text.substr(0, begin), begin) : 0) begin -= n;
      if (t.rstrip)
        while (size_t n = space_at(text, end)) end += n;
      return Match{begin, end, &t};
    }
  }
  return std::nullopt;
}

}  // namespace mx
