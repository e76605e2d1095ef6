#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace mx {
namespace {

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = utf8::valid_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Kimi's wrapper: split at most every max_run code points inside a run of
// all-space or all-non-space characters (Python str.isspace), so no run the
// regex sees is longer than max_run.
template <typename F>
void split_long_runs(std::string_view s, size_t max_run, F&& emit) {
  size_t slice_start = 0, run = 0;
  bool run_is_space = false;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8::valid_sequence_length(s, i);
    bool space = utf8::is_python_space(utf8::decode_at(s, i, n));
    if (i == 0) run_is_space = space;
    if (space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > max_run) {
      emit(s.substr(slice_start, i - slice_start));
      slice_start = i;
      run = 1;
    }
    i += n;
  }
  emit(s.substr(slice_start));
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerParts parts) : p_(std::move(parts)), matcher_(p_.added_tokens) {
  vocab_size_ = p_.model.size();
  for (const auto& t : matcher_.tokens()) vocab_size_ = std::max(vocab_size_, t.id + 1);
  added_index_.assign(vocab_size_, -1);
  for (size_t i = 0; i < matcher_.tokens().size(); ++i) added_index_[matcher_.tokens()[i].id] = static_cast<int32_t>(i);
  p_.added_tokens.clear();  // the matcher holds them
}

const AddedToken* BpeTokenizer::added_token(int32_t id) const {
  if (id < 0 || id >= vocab_size_ || added_index_[id] < 0) return nullptr;
  return &matcher_.tokens()[added_index_[id]];
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::string sanitized;
  if (!is_valid_utf8(text)) {
    // Text arrives as bytes; Python would have decoded them with errors="replace".
    sanitized = utf8::decode_replace(text);
    text = sanitized;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (p_.chunk_code_points == 0) {
    encode_chunk(text, allow_special, out);
    return out;
  }
  // Kimi's wrapper: fixed-size chunks of code points, each cut further at long runs.
  size_t start = 0, count = 0;
  auto flush = [&](size_t end) {
    split_long_runs(text.substr(start, end - start), p_.max_run_code_points,
                    [&](std::string_view piece) { encode_chunk(piece, allow_special, out); });
    start = end;
    count = 0;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (count == p_.chunk_code_points) flush(i);
    ++count;
  }
  flush(text.size());
  return out;
}

void BpeTokenizer::encode_chunk(std::string_view text, bool allow_special, std::vector<int32_t>& out) const {
  size_t pos = 0;
  while (pos < text.size()) {
    auto match = matcher_.empty() ? std::nullopt : matcher_.find(text, pos, allow_special);
    size_t end = match ? match->begin : text.size();
    encode_ordinary(text.substr(pos, end - pos), out);
    if (!match) break;
    out.push_back(match->token->id);
    pos = match->end;
  }
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (p_.nfc) {
    normalized = nfc(text);
    text = normalized;
  }
  if (p_.pre_tokenizer.empty()) {
    p_.model.encode_piece(text, out);
    return;
  }
  p_.pre_tokenizer.split(text, [&](std::string_view piece) { p_.model.encode_piece(piece, out); });
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  if (const AddedToken* t = added_token(id)) {
    if (!p_.byte_level_names) return t->content;
    // HF's ByteLevel decoder maps a token's characters through the byte map
    // when all of them are byte characters, else keeps its UTF-8 as is.
    return byte_unicode::decode(t->content).value_or(t->content);
  }
  if (!p_.model.has(id)) fail_input("token id {} is not in the vocabulary (size {})", id, vocab_size_);
  return p_.model.bytes_of(id);
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes += token_bytes(id);
  }
  return utf8::decode_replace(bytes);
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  for (const auto& t : matcher_.tokens())
    if (t.content == token) return t.id;
  if (!p_.byte_level_names) return p_.model.find(token);
  auto bytes = byte_unicode::decode(token);
  if (!bytes) return std::nullopt;
  return p_.model.find(*bytes);
}

bool BpeTokenizer::is_special(int32_t id) const {
  const AddedToken* t = added_token(id);
  return t != nullptr && t->special;
}

}  // namespace mx
