// Incremental detokenization with stop strings. Token bytes are appended as
// they are sampled; text is released only when it is complete UTF-8 and can
// no longer turn out to be the start of a stop string, so a stream never shows
// text that a later token reveals to be (part of) a stop string. A stop string
// found across token boundaries ends the text right before it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mx {

class OutputText {
 public:
  explicit OutputText(std::vector<std::string> stop_strings);

  // Appends a token's bytes; returns true when a stop string completed (the
  // text is cut right before it; further appends are ignored).
  // detect_stops = false (before min_tokens): the bytes are only appended.
  bool append(std::string_view bytes, bool detect_stops = true);
  // Text that is safe to show now and was not taken before.
  std::string take_ready();
  // At the end of generation: everything not taken yet.
  std::string take_rest();
  const std::string& matched_stop() const { return matched_stop_; }
  const std::string& text() const { return text_; }  // everything so far (stop string excluded)

 private:
  size_t held_back_suffix() const;

  std::vector<std::string> stops_;
  size_t max_stop_len_ = 0;
  std::string text_;
  size_t taken_ = 0;
  bool stopped_ = false;
  std::string matched_stop_;
};

// Length of the longest prefix of s that ends on a complete UTF-8 character
// (an unfinished multi-byte sequence at the end is left out).
size_t complete_utf8_prefix(std::string_view s);
// Replaces invalid UTF-8 with U+FFFD, so the text can go into JSON.
std::string sanitize_utf8(std::string_view s);

}  // namespace mx
