// GPT-2's reversible byte <-> printable-character map used by byte-level BPE
// vocabularies (HF tokenizer.json, GGUF "gpt2" vocabularies): printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in order.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace mx::byte_unicode {

// The UTF-8 of the character that stands for byte b.
const std::string& char_for_byte(unsigned char b);

// Converts raw bytes to their byte-level string.
std::string encode(std::string_view bytes);

// Converts a byte-level string back to raw bytes; nullopt when a character is
// not one of the 256 byte characters.
std::optional<std::string> decode(std::string_view text);

}  // namespace mx::byte_unicode
