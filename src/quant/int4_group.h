// compressed-tensors "pack-quantized" INT4, symmetric, per-group along K (the
// original moonshotai/Kimi-K2.5 routed experts): weight_packed I32
// [rows, cols/8] holds 8 nibbles per int32, element j of each 8 in bits
// [4j, 4j+3] (low nibble first), offset-coded q = nibble - 8; weight_scale
// (BF16) [rows, cols/group]; W = q * scale[r, c/group].
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mx {

inline int int4_unpack(const int32_t* packed, int64_t i) {
  return int((uint32_t(packed[i / 8]) >> (4 * (i % 8))) & 0xf) - 8;
}

struct Int4GroupMatrix {
  Tensor packed;  // I32 [rows, cols/8]
  Tensor scale;   // BF16 [rows, cols/group]
};

// Symmetric min-max: scale = bf16(amax / 7) (1 for a zero group),
// q = clamp(round_half_even(w / scale), -8, 7).
Int4GroupMatrix int4_group_quantize(const float* w, int64_t rows, int64_t cols, int64_t group = 32);
// Validates shapes (scale may be BF16/F16/F32) and returns F32 [rows, cols].
Tensor int4_group_dequantize(const Tensor& packed, const Tensor& scale, int64_t group = 32);

}  // namespace mx
