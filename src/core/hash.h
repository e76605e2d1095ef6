// FNV-1a, 64 bit: a stable hash of names and small files (the same value on
// every machine and run), for seeds derived from tensor names and for
// fingerprints nodes compare. Not for hash tables or anything adversarial.
#pragma once
#include <cstdint>
#include <string_view>

namespace mx {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace mx
