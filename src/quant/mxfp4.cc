#include "quant/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace mx {

int mxfp4_scale_exponent(float amax) {
  uint32_t rounded = (bits_from_f32(std::fabs(amax)) + 0x00200000u) & 0xFF800000u;
  uint32_t field = rounded >> 23;
  if (field == 0xff) return 127;   // amax' = inf: log2 = inf, clamped
  if (field == 0) return -127;     // amax' = 0: log2 = -inf, clamped
  return std::clamp(int(field) - 127 - 2, -127, 127);
}

uint8_t mxfp4_quantize_block(const float* x, uint8_t* packed16) {
  float amax = 0.f;
  for (int i = 0; i < kMxfp4Block; ++i) {
    if (std::isnan(x[i])) {
      std::fill(packed16, packed16 + 16, uint8_t(0));
      return 255;
    }
    amax = std::max(amax, std::fabs(x[i]));
  }
  int e_s = mxfp4_scale_exponent(amax);
  for (int j = 0; j < 16; ++j) {
    // ldexp by a power of two is exact (an underflow only loses values far
    // below E2M1's smallest step, which round to 0 anyway).
    uint8_t lo = f32_to_e2m1(std::ldexp(x[2 * j], -e_s));
    uint8_t hi = f32_to_e2m1(std::ldexp(x[2 * j + 1], -e_s));
    packed16[j] = e2m1_pack(lo, hi);
  }
  return uint8_t(e_s + 127);
}

void mxfp4_dequantize_block(const uint8_t* packed16, uint8_t scale, float* out32) {
  float s = e8m0_to_f32(scale);
  for (int j = 0; j < 16; ++j) {
    out32[2 * j] = e2m1_to_f32(e2m1_lo(packed16[j])) * s;
    out32[2 * j + 1] = e2m1_to_f32(e2m1_hi(packed16[j])) * s;
  }
}

void mxfp4_qdq_activation_inplace(float* x, int64_t n) {
  if (n % kMxfp4Block != 0) fail("MXFP4 activation row length {} is not a multiple of 32", n);
  uint8_t packed[16];
  for (int64_t b = 0; b < n; b += kMxfp4Block) {
    uint8_t scale = mxfp4_quantize_block(x + b, packed);
    if (scale == 255) {
      std::fill(x + b, x + b + kMxfp4Block, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    mxfp4_dequantize_block(packed, scale, x + b);
  }
}

void mxfp4_qdq_activation_inplace_bf16(uint16_t* x, int64_t n) {
  if (n % kMxfp4Block != 0) fail("MXFP4 activation row length {} is not a multiple of 32", n);
  float block[kMxfp4Block];
  for (int64_t b = 0; b < n; b += kMxfp4Block) {
    for (int i = 0; i < kMxfp4Block; ++i) block[i] = bf16_to_f32(x[b + i]);
    mxfp4_qdq_activation_inplace(block, kMxfp4Block);
    for (int i = 0; i < kMxfp4Block; ++i) x[b + i] = f32_to_bf16(block[i]);  // exact
  }
}

Mxfp4Matrix mxfp4_quantize_matrix(const float* w, int64_t rows, int64_t cols) {
  if (cols % kMxfp4Block != 0) fail("MXFP4 quantization needs columns divisible by 32, got {}", cols);
  Mxfp4Matrix m{Tensor::empty(DType::U8, {rows, cols / 2}), Tensor::empty(DType::U8, {rows, cols / 32})};
  uint8_t* packed = m.weight.data<uint8_t>();
  uint8_t* scale = m.scale.data<uint8_t>();
  for (int64_t g = 0; g < rows * cols / kMxfp4Block; ++g) scale[g] = mxfp4_quantize_block(w + g * 32, packed + g * 16);
  return m;
}

Tensor mxfp4_dequantize_matrix(const Tensor& weight, const Tensor& scale) {
  if (weight.ndim() != 2 || scale.ndim() != 2 || weight.dtype() != DType::U8 ||
      (scale.dtype() != DType::U8 && scale.dtype() != DType::E8M0))
    fail("MXFP4 dequantize: want U8 weight and U8/E8M0 scale matrices, got {} and {}", weight.describe(),
         scale.describe());
  int64_t rows = weight.dim(0), cols = weight.dim(1) * 2;
  if (scale.dim(0) != rows || scale.dim(1) * 32 != cols)
    fail("MXFP4 dequantize: scale {} does not match weight {} (want [{}, {}])", scale.describe(), weight.describe(),
         rows, cols / 32);
  Tensor out = Tensor::empty(DType::F32, {rows, cols});
  const uint8_t* p = weight.data<uint8_t>();
  const uint8_t* s = scale.data<uint8_t>();
  for (int64_t g = 0; g < rows * cols / kMxfp4Block; ++g)
    mxfp4_dequantize_block(p + g * 16, s[g], out.data<float>() + g * 32);
  return out;
}

}  // namespace mx
