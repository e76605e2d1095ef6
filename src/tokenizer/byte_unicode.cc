#include "tokenizer/byte_unicode.h"

#include <array>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace mx::byte_unicode {
namespace {

bool prints_as_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> chars;
  std::unordered_map<uint32_t, unsigned char> bytes;  // code point -> byte
  Tables() {
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = prints_as_itself(b) ? b : 256 + next++;
      utf8::append_code_point(chars[b], cp);
      bytes[cp] = static_cast<unsigned char>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& char_for_byte(unsigned char b) { return tables().chars[b]; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += char_for_byte(static_cast<unsigned char>(c));
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  const auto& map = tables().bytes;
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t n = utf8::valid_sequence_length(text, i);
    if (n == 0) return std::nullopt;
    auto it = map.find(utf8::decode_at(text, i, n));
    if (it == map.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    i += n;
  }
  return out;
}

}  // namespace mx::byte_unicode
