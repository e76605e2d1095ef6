#include "engine/output_text.h"

#include <algorithm>

namespace mx {

namespace {
// Number of bytes of a UTF-8 sequence from its lead byte; 0 for a continuation or invalid byte.
size_t utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xe) return 3;
  if ((c >> 3) == 0x1e) return 4;
  return 0;
}
}  // namespace

size_t complete_utf8_prefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    const size_t len = utf8_length(c);
    return len > back ? s.size() - back : s.size();
  }
  return s.size();  // only stray continuation bytes: nothing to wait for
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_length(static_cast<unsigned char>(s[i]));
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append("\xef\xbf\xbd");
      ++i;
    }
  }
  return out;
}

OutputText::OutputText(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  for (const auto& s : stops_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

bool OutputText::append(std::string_view bytes, bool detect_stops) {
  if (stopped_) return true;
  const size_t old_size = text_.size();
  text_.append(bytes);
  if (stops_.empty() || !detect_stops) return false;
  // A new match must end inside the appended bytes and cannot start in text
  // already released (released text never holds a stop-string prefix).
  const size_t from = std::max(taken_, old_size >= max_stop_len_ ? old_size - max_stop_len_ + 1 : size_t(0));
  size_t best = std::string::npos;
  for (const auto& stop : stops_) {
    const size_t pos = text_.find(stop, from);
    if (pos < best) {
      best = pos;
      matched_stop_ = stop;
    }
  }
  if (best == std::string::npos) return false;
  text_.resize(best);
  stopped_ = true;
  return true;
}

size_t OutputText::held_back_suffix() const {
  if (stopped_) return 0;
  size_t hold = 0;
  for (const auto& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, text_.size() - taken_); k > hold; --k) {
      if (std::string_view(text_).substr(text_.size() - k) == std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

std::string OutputText::take_ready() {
  const size_t end = complete_utf8_prefix(std::string_view(text_).substr(0, text_.size() - held_back_suffix()));
  if (end <= taken_) return {};
  std::string out = text_.substr(taken_, end - taken_);
  taken_ = end;
  return out;
}

std::string OutputText::take_rest() {
  std::string out = text_.substr(std::min(taken_, text_.size()));
  taken_ = text_.size();
  return out;
}

}  // namespace mx
