// The W4A4 activation quantize-dequantize of one 32-value block, shared by the
// kernels that apply it to differently laid-out activations (mxfp4_prep.cu's
// row-major qdq_kernel and fused_moe_decode.cu's x quantizer through qdq_quarter,
// fused_moe_ws.cu's chunk layout): the reference
// algorithm of ../shared/docs/mxfp4.md, bit-exact to host/mxfp4_reference.cc
// (amax rounded up at mantissa >= 1.75, scale floor(log2) - 2 clamped to
// [-127, 127], E2M1 round-half-even saturating at 6, the input's sign bit).
#pragma once
#include <cstdint>

#include "cuda/e2m1_round.cuh"
#include "cuda/mxfp4_device.cuh"

namespace mx::cuda::dev {

// 2^e as a float for e in [-127, 127] (2^-127 is a subnormal).
__device__ __forceinline__ float exp2_int(int e) {
  return e >= -126 ? __uint_as_float(uint32_t(e + 127) << 23) : __uint_as_float(0x00400000u);
}

// The block's scale exponent from the largest |value|'s BF16 bits (sign cleared).
__device__ __forceinline__ int qdq_scale_exponent(uint32_t amax_bits) {
  const uint32_t rounded = (amax_bits + 0x20u) & 0xFF80u;
  return min(max(int(rounded >> 7) - 129, -127), 127);
}

// One BF16 value quantize-dequantized with the block's scale 2^e_s
// (inv = 2^-e_s, scale = 2^e_s); the result is exact in BF16.
__device__ __forceinline__ uint16_t qdq_bf16(uint16_t h, float inv, float scale) {
  const float mag = e2m1_round_magnitude(fabsf(bf16_bits_to_float(h)) * inv) * scale;
  return float_to_bf16_bits(mag) | (h & 0x8000);
}

// The |BF16| bits' maximum of a 32-block whose quarters (8 values each) are
// held by lanes 4k..4k+3 (blocks start at multiples of 4 lanes): two
// shuffles, so all 32 lanes of the warp must call it.
__device__ __forceinline__ uint32_t quarter_block_amax(const uint4& v) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
  uint32_t amax = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = max(amax, uint32_t(h[i] & 0x7FFF));
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  return max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
}

// The quantize-dequantize of 8 BF16 values, one quarter of a 32-block
// (quarter_block_amax: every lane of the warp calls it).
__device__ __forceinline__ uint4 qdq_quarter(uint4 v) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
  const int e_s = qdq_scale_exponent(quarter_block_amax(v));
  const float inv = exp2_int(-e_s), scale = exp2_int(e_s);
  uint4 o;
  uint16_t* oh = reinterpret_cast<uint16_t*>(&o);
#pragma unroll
  for (int i = 0; i < 8; ++i) oh[i] = qdq_bf16(h[i], inv, scale);
  return o;
}

}  // namespace mx::cuda::dev
