// Unicode normalization for tokenizer.json normalizers (Qwen2 uses NFC), via ICU.
#pragma once
#include <string>
#include <string_view>

namespace mx {

// NFC of valid UTF-8 text; ASCII and already-normalized text come back unchanged.
std::string nfc(std::string_view text);

}  // namespace mx
