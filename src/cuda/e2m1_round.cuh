// E2M1 magnitude rounding shared by the MXFP4 quantizers on the GPU (the W4A4
// activation quantize-dequantize of mxfp4_prep.cu and of the CUDA backend's
// F32 path, and the FP8 folding quantizer of w4a4_fp8_quant.cu): the grid
// {0, 0.5, 1, 1.5, 2, 3, 4, 6} with ties to the even code, as
// host/mxfp4_reference.cc round_to_e2m1_magnitude and core/dtype.cc f32_to_e2m1.
#pragma once
#include <cstdint>

namespace mx::cuda {

// The 3-bit magnitude code (exponent e1 e0, mantissa m) of v >= 0.
__device__ __forceinline__ uint32_t e2m1_round_code(float v) {
  if (v <= 0.25f) return 0;
  if (v < 0.75f) return 1;
  if (v <= 1.25f) return 2;
  if (v < 1.75f) return 3;
  if (v <= 2.5f) return 4;
  if (v < 3.5f) return 5;
  if (v <= 5.0f) return 6;
  return 7;
}

// The value of a magnitude code: 0 and 0.5 for codes 0-1 (E2M1's subnormals),
// else 2^(e - 1) * (1 + m / 2), built as F32 bits.
__device__ __forceinline__ float e2m1_code_value(uint32_t c) {
  return c < 2 ? 0.5f * float(c) : __uint_as_float((((c >> 1) + 126u) << 23) | ((c & 1u) << 22));
}

__device__ __forceinline__ float e2m1_round_magnitude(float v) { return e2m1_code_value(e2m1_round_code(v)); }

}  // namespace mx::cuda
