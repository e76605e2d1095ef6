// Streams text out of generated ids: each push returns the new text, never
// ending inside a UTF-8 sequence that later bytes could still complete. The
// deltas of push()... + finish() concatenate to exactly tokenizer.decode(ids)
// (bytes that never form a character become U+FFFD, as Python's
// errors="replace" decode of the whole sequence does).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "tokenizer/tokenizer.h"

namespace mx {

class IncrementalDetokenizer {
 public:
  // The tokenizer must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special);

  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  // Ends the stream: returns whatever is still held back (as U+FFFD).
  std::string finish();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace mx
