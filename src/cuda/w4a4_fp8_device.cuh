// Device pieces of the W4A4 FP8 path shared by its quantizer and its GEMM
// kernels (w4a4_fp8_quant.cu, w4a4_fp8_moe.cu).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/e2m1_round.cuh"
#include "cuda/host/fp8_fold.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_qdq.cuh"

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

// The activation quantizers' piece: 8 consecutive BF16 values of a row, four
// lanes (4k .. 4k + 3 of a warp) per 32-block. The block's E8M0 scale byte,
// bit-exact to host/mxfp4_reference.h (amax over the four lanes by two
// shuffles; every lane of the warp takes part, lanes without a piece with
// zeros).
__device__ __forceinline__ int fp8_piece_scale(const uint4& v) {
  return qdq_scale_exponent(quarter_block_amax(v)) + 127;
}

// The piece's 8 values as MXFP4 codes of block scale byte sb, folded into
// E4M3 bytes for a row whose largest scale byte is smax.
__device__ __forceinline__ void fp8_piece_fold(const uint4& v, int sb, int smax, uint32_t (&byte)[8]) {
  uint32_t lo, hi;
  fp8_fold_table(sb - smax, lo, hi);
  const float inv = fp8_pow2(127 - sb);
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t m = e2m1_round_code(fabsf(bf16_bits_to_float(h[j])) * inv);
    byte[j] = (fp8_byte_perm(lo, hi, m) & 0xFF) | ((h[j] >> 8) & 0x80);
  }
}

}  // namespace mx::cuda::dev
