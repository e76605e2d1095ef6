#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "core/error.h"

namespace mx {

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) fail("ICU NFC normalizer unavailable: {}", u_errorName(status));
  icu::UnicodeString source = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (normalizer->isNormalized(source, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  icu::UnicodeString result = normalizer->normalize(source, status);
  if (U_FAILURE(status)) fail("ICU NFC normalization failed: {}", u_errorName(status));
  std::string out;
  result.toUTF8String(out);
  return out;
}

}  // namespace mx
