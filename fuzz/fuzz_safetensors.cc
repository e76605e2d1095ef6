// libFuzzer harness: the safetensors header reader on arbitrary bytes (the
// whole file: length field, JSON header, data). Any outcome but a returned
// map or mx::InvalidArgument is a bug; a returned map must describe tensors
// that lie inside the input.
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto entries = mx::parse_safetensors_header(data, size, "fuzz.safetensors");
    for (const auto& [name, e] : entries)
      if (e.begin > e.end || e.end > size) std::abort();  // the reader promised in-bounds offsets
  } catch (const mx::InvalidArgument&) {
  }
  return 0;
}
