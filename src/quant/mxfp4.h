// Reference MXFP4 codecs (OCP MX v1.0, the Quark/vLLM contract in
// docs mxfp4.md): E2M1 nibble pairs (element 2j in the LOW nibble), E8M0
// block scales, the block quantizer shared by weights and activations, and
// the W4A4 activation quantize-dequantize. Scalar and exact; kernels are
// checked against these.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mx {

inline constexpr int64_t kMxfp4Block = 32;

inline uint8_t e2m1_pack(uint8_t lo, uint8_t hi) { return uint8_t((lo & 0xf) | ((hi & 0xf) << 4)); }
inline uint8_t e2m1_lo(uint8_t byte) { return byte & 0xf; }
inline uint8_t e2m1_hi(uint8_t byte) { return byte >> 4; }

// The block scale exponent e_s of the reference algorithm for a block whose
// largest magnitude is `amax`: round amax up to the next power of two when its
// mantissa is >= 1.75 (the BF16 trick (bits + 0x20) & 0xFF80, applied here to
// the F32 bits, identical for BF16-representable input), then
// e_s = floor(log2 amax') - 2 clamped to [-127, 127]. amax' = 0 gives -127 and
// amax' = inf gives 127 (torch's floor(log2(.)) then clamp). NaN amax is the
// caller's business (see mxfp4_quantize_block).
int mxfp4_scale_exponent(float amax);

// Quantizes 32 values to 16 packed bytes and returns the E8M0 scale byte
// e_s + 127. Each value is x / 2^e_s rounded half-to-even to E2M1, saturating
// at +-6. A block holding NaN gets scale byte 255 (NaN per OCP) and zero codes.
uint8_t mxfp4_quantize_block(const float* x, uint8_t* packed16);
// 16 packed bytes + scale byte -> 32 floats (exact; NaN for scale 255).
void mxfp4_dequantize_block(const uint8_t* packed16, uint8_t scale, float* out32);

// W4A4 activation quantize-dequantize, in place, per 32-element group along a
// row of length n (n % 32 == 0; call once per row or on a whole [rows, n]
// buffer, groups never straddle rows since n is a multiple of 32). Input
// values must be BF16-representable (the contract); outputs are exactly
// representable in BF16. A group containing NaN becomes all NaN, as in the
// torch reference. Stable name: the model and CUDA backends call this.
void mxfp4_qdq_activation_inplace(float* x, int64_t n);
// Same on raw BF16 bits.
void mxfp4_qdq_activation_inplace_bf16(uint16_t* x, int64_t n);

// Whole-matrix codecs. rows x cols with cols % 32 == 0.
struct Mxfp4Matrix {
  Tensor weight;  // U8 [rows, cols/2]
  Tensor scale;   // U8 (E8M0) [rows, cols/32]
};
Mxfp4Matrix mxfp4_quantize_matrix(const float* w, int64_t rows, int64_t cols);
// weight U8 [rows, cols/2], scale U8/E8M0 [rows, cols/32] -> F32 [rows, cols].
Tensor mxfp4_dequantize_matrix(const Tensor& weight, const Tensor& scale);

}  // namespace mx
