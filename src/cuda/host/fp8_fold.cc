#include "cuda/host/fp8_fold.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "cuda/host/mxfp4_reference.h"

namespace mx::cuda {

uint8_t fold_code_reference(uint8_t code, int d) {
  const float v = std::ldexp(e2m1_value(code & 7), d + kFp8FoldShift);
  const uint8_t sign = (code & 8) ? 0x80 : 0;
  // f32_to_fp8e4m3 rounds to nearest even on E4M3's grid (subnormals included).
  return sign | f32_to_fp8e4m3(v);
}

void fold_table_reference(int d, uint32_t& lo, uint32_t& hi) {
  lo = hi = 0;
  for (int m = 0; m < 8; ++m) {
    const uint32_t byte = fold_code_reference(uint8_t(m), d);
    if (m < 4) lo |= byte << (8 * m);
    else hi |= byte << (8 * (m - 4));
  }
}

bool fold_is_exact(int d) {
  for (int m = 1; m < 8; ++m)
    if (fp8e4m3_to_f32(fold_code_reference(uint8_t(m), d)) !=
        std::ldexp(e2m1_value(uint8_t(m)), d + kFp8FoldShift))
      return false;
  return true;
}

uint8_t row_max_scale(const uint8_t* scales, int64_t blocks) {
  uint8_t m = 0;
  for (int64_t b = 0; b < blocks; ++b) m = std::max(m, scales[b]);
  return m;
}

}  // namespace mx::cuda
