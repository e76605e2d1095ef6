// Device pieces of the W4A4 FP8 path shared by its quantizer and its GEMM
// kernels (w4a4_fp8_quant.cu, w4a4_fp8_moe.cu).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/host/fp8_fold.h"

namespace mx::cuda::dev {

// The fold table (host/fp8_fold.h) for any d <= 0: the two-instruction
// formula where it holds, else each byte through the hardware's
// round-to-nearest-even E4M3 conversion (blocks more than 11 binades under
// their row's maximum; rare, and rounded only beyond 14).
__device__ __forceinline__ void fp8_fold_table(int d, uint32_t& lo, uint32_t& hi) {
  if (d >= kFp8FoldFastMinDelta) return fold_table_fast(d, lo, hi);
  const float mag[8] = {0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const int e = d + kFp8FoldShift;
  lo = hi = 0;
#pragma unroll
  for (int m = 1; m < 8; ++m) {
    const float v = e >= -149 ? mag[m] * fp8_pow2(e) : 0.f;
    const uint32_t b = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    if (m < 4) lo |= b << (8 * m);
    else hi |= b << (8 * (m - 4));
  }
}

}  // namespace mx::cuda::dev
