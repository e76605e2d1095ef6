#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/utf8.h"

namespace mx {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(int32_t id) { return push(std::span<const int32_t>(&id, 1)); }

std::string IncrementalDetokenizer::push(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (skip_special_ && tokenizer_.is_special(id)) continue;
    pending_ += tokenizer_.token_bytes(id);
  }
  // Everything before an unfinished (still completable) sequence is settled:
  // no later byte can change how it decodes.
  size_t ready = utf8::complete_prefix_length(pending_);
  std::string delta = utf8::decode_replace(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return delta;
}

std::string IncrementalDetokenizer::finish() {
  std::string rest = utf8::decode_replace(pending_);
  pending_.clear();
  return rest;
}

}  // namespace mx
