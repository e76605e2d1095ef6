#include "tokenizer/utf8.h"

namespace mx::utf8 {
namespace {

// Allowed range of the second byte for each lead byte (Unicode Table 3-7);
// later continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  size_t length;
  uint8_t second_lo, second_hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from s[i] form a valid (possibly incomplete) prefix of a
// sequence; sets `complete` when the whole sequence is there.
size_t valid_prefix(std::string_view s, size_t i, bool& complete) {
  complete = false;
  auto lead = static_cast<uint8_t>(s[i]);
  LeadInfo info = lead_info(lead);
  if (info.length == 0) return 0;
  if (info.length == 1) {
    complete = true;
    return 1;
  }
  size_t n = 1;
  while (n < info.length && i + n < s.size()) {
    auto b = static_cast<uint8_t>(s[i + n]);
    uint8_t lo = n == 1 ? info.second_lo : 0x80, hi = n == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return n;
    ++n;
  }
  complete = n == info.length;
  return n;
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t i) {
  bool complete;
  size_t n = valid_prefix(s, i, complete);
  return complete ? n : 0;
}

size_t invalid_subpart_length(std::string_view s, size_t i) {
  bool complete;
  size_t n = valid_prefix(s, i, complete);
  return n == 0 ? 1 : n;
}

uint32_t decode_at(std::string_view s, size_t i, size_t len) {
  auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string decode_replace(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t n = valid_sequence_length(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += invalid_subpart_length(bytes, i);
    }
  }
  return out;
}

size_t complete_prefix_length(std::string_view s) {
  // Only the last 3 bytes can start an unfinished sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80 || (b & 0xC0) == 0x80) continue;  // ASCII or continuation
    bool complete;
    size_t n = valid_prefix(s, i, complete);
    if (!complete && n > 0 && i + n == s.size()) return i;  // a valid prefix, wait for more
  }
  return s.size();
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

bool is_python_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace mx::utf8
