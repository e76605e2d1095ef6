// Host reference semantics of MXFP4 (docs: ../shared/docs/mxfp4.md): exact
// dequantization and the reference activation quantizer that W4A4 applies.
// The CUDA kernels are checked against these.
#pragma once
#include <cstdint>

namespace mx::cuda {

// E2M1 code (0..15) -> value: {0, .5, 1, 1.5, 2, 3, 4, 6}, 8..15 negated.
float e2m1_value(uint8_t code);
// E8M0 byte -> 2^(e - 127); 255 -> NaN.
float e8m0_value(uint8_t e);
// W[r, k] of a checkpoint-layout weight (codes [N, K/2], scales [N, K/32]).
float dequant_element(const uint8_t* codes, const uint8_t* scales, int64_t K, int64_t r,
                      int64_t k);

// One 32-element block of BF16 activations (raw bits) quantized as the
// reference says: amax rounded up to a power of two when its mantissa is
// >= 1.75, scale exponent floor(log2 amax') - 2 clamped to [-127, 127], codes
// by round-half-to-even onto the E2M1 grid with saturation at +-6. The code's
// sign is the input's sign bit (so -0.1 with a large scale gives -0).
struct QuantizedBlock {
  uint8_t scale;       // E8M0 byte e_s + 127
  uint8_t codes[32];   // E2M1 codes
};
QuantizedBlock quantize_block_reference(const uint16_t* x_bf16);

// Quantize-dequantize one block: BF16 bits of code * 2^e_s (exact in BF16).
void qdq_block_reference(const uint16_t* x_bf16, uint16_t* out_bf16);

// Rounds a non-negative magnitude (already divided by the scale) to the E2M1
// magnitude code 0..7, ties to the even code, saturating at 6.
uint8_t round_to_e2m1_magnitude(float v);

}  // namespace mx::cuda
