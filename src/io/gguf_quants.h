// Decoders for ggml's 32-element block formats, written from the block layouts
// in ggml-common.h (QK = 32 elements per block, little-endian fields):
//   Q4_0  {f16 d; u8 qs[16]}        x = (q - 8) * d
//   Q4_1  {f16 d; f16 m; u8 qs[16]} x = q * d + m
//   Q8_0  {f16 d; i8 qs[32]}        x = q * d
//   MXFP4 {u8 e; u8 qs[16]}         x = E2M1(q) * 2^(e - 127)
// In every 4-bit format byte j holds element j in its LOW nibble and element
// j + 16 in its HIGH nibble (the engine's MXFP4 layout instead pairs elements
// 2j, 2j+1, so MXFP4 is re-packed, losslessly).
#pragma once
#include <cstdint>

namespace mx::gguf {

// Dequantizes n elements (a multiple of 32) of a Q4_0/Q4_1/Q8_0/MXFP4 row to
// BF16 (computed in F32 as ggml does, then rounded to nearest even).
void dequantize_to_bf16(uint32_t ggml_type, const uint8_t* blocks, int64_t n, uint16_t* out);

// One row of n MXFP4 elements (n/32 blocks) to the engine's layout: packed
// [n/2] bytes with element 2j in the low nibble, and E8M0 scales [n/32].
// Exact: codes and scale bytes are copied, only nibble positions change.
void mxfp4_to_engine(const uint8_t* blocks, int64_t n, uint8_t* packed, uint8_t* scales);

}  // namespace mx::gguf
