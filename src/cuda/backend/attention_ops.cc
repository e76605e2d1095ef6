// CudaOps' attention ops: forwarded to CudaAttention (cuda_attention.h, the
// device KV cache and attention kernels), or with CudaOpsOptions::cpu_attention
// run on the CPU reference over a host-resident KV cache: the op's device
// inputs are copied to the host, the CPU computes, and the result is copied
// back (the one place activations then leave the GPU during a step).
#include "core/error.h"
#include "cuda/backend/cuda_ops.h"
#include "cuda/backend/device_memory.h"

namespace mx::cuda {

KvLayerCache CudaOps::allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                                  bool latent, DType dtype) {
  if (options_.cpu_attention) return cpu_->allocate_kv(num_blocks, block_size, heads, k_dim, v_dim, latent, dtype);
  return attention_.allocate_kv(num_blocks, block_size, heads, k_dim, v_dim, latent, dtype);
}

void CudaOps::store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) {
  if (options_.cpu_attention) return cpu_->store_kv(cache, to_host(k), v.defined() ? to_host(v) : v, slots);
  attention_.store_kv(cache, to_device(k), v.defined() ? to_device(v) : v, slots);
}

Tensor CudaOps::paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta, float scale) {
  if (options_.cpu_attention) return to_device(cpu_->paged_attention(to_host(q), cache, meta, scale));
  return attention_.paged_attention(to_device(q), cache, meta, scale);
}

Tensor CudaOps::gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                                int64_t num_tokens) {
  if (options_.cpu_attention) return to_device(cpu_->gather_cached_k(cache, block_table, num_tokens));
  return attention_.gather_cached_k(cache, block_table, num_tokens);
}

Tensor CudaOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  if (options_.cpu_attention) return to_device(cpu_->attention(to_host(q), to_host(k), to_host(v), scale));
  return attention_.attention(to_device(q), to_device(k), to_device(v), scale);
}

}  // namespace mx::cuda
