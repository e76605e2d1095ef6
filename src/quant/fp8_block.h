// FP8 E4M3 with one float32 scale per 128x128 block (DeepSeek-V3,
// Kimi-K2-Instruct): W = fp8 * weight_scale_inv[r/128, c/128]. The scale
// grid is [ceil(rows/128), ceil(cols/128)]; edge blocks may be partial.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mx {

inline constexpr int64_t kFp8Block = 128;

struct Fp8BlockMatrix {
  Tensor weight;     // F8E4M3 [rows, cols]
  Tensor scale_inv;  // F32 [ceil(rows/block), ceil(cols/block)]
};

// Per block: scale_inv = amax / 448 (1 for an all-zero block), q = e4m3(w / scale_inv).
Fp8BlockMatrix fp8_block_quantize(const float* w, int64_t rows, int64_t cols, int64_t block = kFp8Block);
// Validates shapes and returns F32 [rows, cols].
Tensor fp8_block_dequantize(const Tensor& weight, const Tensor& scale_inv, int64_t block = kFp8Block);

}  // namespace mx
