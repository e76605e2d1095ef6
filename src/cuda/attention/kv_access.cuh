// Device-side reads of a KvView and of the step's sequence layout, shared by
// the attention and KV-cache kernels. Dequantization matches the CPU backend
// (src/ops/cpu_attention.cc): BF16 widened exactly, FP8 E4M3 decoded exactly
// and multiplied by the row's F32 scale.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "cuda/attention/attention_kernels.h"

namespace mx::cuda {

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

__device__ __forceinline__ float fp8_to_f32(uint8_t b) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), __NV_E4M3);
  return __half2float(__half(h));
}

// Element e of the row at `base` (an element offset), without the FP8 scale.
template <KvType T>
__device__ __forceinline__ float kv_load(const void* data, int64_t index) {
  if constexpr (T == KvType::F32) {
    return __ldg(static_cast<const float*>(data) + index);
  } else if constexpr (T == KvType::BF16) {
    return bf16_bits_to_f32(__ldg(static_cast<const unsigned short*>(data) + index));
  } else {
    return fp8_to_f32(__ldg(static_cast<const unsigned char*>(data) + index));
  }
}

// The cache row of token j of sequence `seq` (identity for dense tensors).
__device__ __forceinline__ int64_t kv_row(const SeqLayout& s, int32_t seq, int64_t j) {
  if (!s.block_tables) return j;
  const int32_t block = s.block_tables[int64_t(seq) * s.max_blocks + j / s.block_size];
  return int64_t(block) * s.block_size + j % s.block_size;
}

struct SeqInfo {
  int32_t q_begin, num_new, num_cached;
};

__device__ __forceinline__ SeqInfo seq_info(const SeqLayout& s, int32_t seq) {
  if (!s.q_begin) return {0, s.single_new, s.single_cached};
  return {s.q_begin[seq], s.num_new[seq], s.num_cached[seq]};
}

}  // namespace mx::cuda
