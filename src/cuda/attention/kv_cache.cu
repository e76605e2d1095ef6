// KV cache writes (store_kv) and reads of one sequence's rows (gather_cached_k).
// The FP8 store is bit-exact with the CPU backend: the same amax / 448 scale
// (IEEE division), x / s by IEEE division, and the hardware's E4M3 conversion
// with round-to-nearest-even and saturation to +-448, which is what
// core/dtype.h's f32_to_fp8e4m3 computes in software.
#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"

namespace mx::cuda {
namespace {

constexpr int kStoreThreads = 256;
constexpr float kFp8Max = 448.0f;

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float m = 0.0f;
  for (int w = 0; w < kStoreThreads / 32; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

template <KvType T>
__global__ void store_kv_kernel(const float* src, const int64_t* slots, KvView dst, int64_t n) {
  __shared__ float scratch[kStoreThreads / 32];
  const float* row = src + int64_t(blockIdx.x) * n;
  const int64_t slot = slots[blockIdx.x];
  if constexpr (T == KvType::F32) {
    float* d = static_cast<float*>(const_cast<void*>(dst.data)) + slot * dst.row_stride;
    for (int64_t i = threadIdx.x; i < n; i += kStoreThreads) d[i] = row[i];
  } else if constexpr (T == KvType::BF16) {
    __nv_bfloat16* d = static_cast<__nv_bfloat16*>(const_cast<void*>(dst.data)) + slot * dst.row_stride;
    for (int64_t i = threadIdx.x; i < n; i += kStoreThreads) d[i] = __float2bfloat16_rn(row[i]);
  } else {
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += kStoreThreads) amax = fmaxf(amax, fabsf(row[i]));
    amax = block_max(amax, scratch);
    const float s = amax > 0.0f ? amax / kFp8Max : 1.0f;
    if (threadIdx.x == 0) const_cast<float*>(dst.scale)[slot] = s;
    uint8_t* d = static_cast<uint8_t*>(const_cast<void*>(dst.data)) + slot * dst.row_stride;
    for (int64_t i = threadIdx.x; i < n; i += kStoreThreads)
      d[i] = uint8_t(__nv_cvt_float_to_fp8(row[i] / s, __NV_SATFINITE, __NV_E4M3));
  }
}

template <KvType T>
__global__ void gather_kv_kernel(KvView k, const int32_t* block_table, int32_t block_size, float* out) {
  const int64_t j = blockIdx.x;
  const int64_t row = int64_t(block_table[j / block_size]) * block_size + j % block_size;
  const float s = T == KvType::FP8 ? k.scale[row] : 1.0f;
  const int64_t n = int64_t(k.heads) * k.dim;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t h = i / k.dim, e = i % k.dim;
    const float x = kv_load<T>(k.data, row * k.row_stride + h * k.head_stride + e);
    out[j * n + i] = T == KvType::FP8 ? x * s : x;
  }
}

}  // namespace

void launch_store_kv(const float* src, int64_t tokens, const int64_t* slots, const KvView& dst, cudaStream_t stream) {
  if (tokens == 0) return;
  const int64_t n = int64_t(dst.heads) * dst.dim;
  switch (dst.type) {
    case KvType::F32: store_kv_kernel<KvType::F32><<<unsigned(tokens), kStoreThreads, 0, stream>>>(src, slots, dst, n); break;
    case KvType::BF16: store_kv_kernel<KvType::BF16><<<unsigned(tokens), kStoreThreads, 0, stream>>>(src, slots, dst, n); break;
    case KvType::FP8: store_kv_kernel<KvType::FP8><<<unsigned(tokens), kStoreThreads, 0, stream>>>(src, slots, dst, n); break;
  }
}

void launch_gather_kv(const KvView& k, const int32_t* block_table, int32_t block_size, int64_t num_tokens, float* out,
                      cudaStream_t stream) {
  if (num_tokens == 0) return;
  const unsigned blocks = unsigned(num_tokens);
  switch (k.type) {
    case KvType::F32: gather_kv_kernel<KvType::F32><<<blocks, 256, 0, stream>>>(k, block_table, block_size, out); break;
    case KvType::BF16: gather_kv_kernel<KvType::BF16><<<blocks, 256, 0, stream>>>(k, block_table, block_size, out); break;
    case KvType::FP8: gather_kv_kernel<KvType::FP8><<<blocks, 256, 0, stream>>>(k, block_table, block_size, out); break;
  }
}

}  // namespace mx::cuda
