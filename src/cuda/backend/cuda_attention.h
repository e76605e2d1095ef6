// The attention half of the CUDA backend: paged KV storage (BF16, FP8 E4M3 with
// one F32 scale per token, F32) and the attention kernels, behind the same
// contract as ops.h's attention ops (the CPU backend in src/ops/cpu_attention.cc
// is the reference). All Tensor arguments and results are device tensors
// (device_memory.h); CudaOps forwards its attention ops here.
//
// KV layout (identical to the CPU backend, so parity is element for element):
//   k: [num_blocks, block_size, heads, k_dim], v: same with v_dim (GQA/MHA),
//   or v undefined for a latent (MLA) cache whose values are the first v_dim
//   entries of each k row (k_dim = kv_lora 512 + rope 64 = 576 for Kimi/DeepSeek).
//   FP8: k_scale (v_scale) F32 [num_blocks, block_size]: one scale per token
//   over all its heads, amax / 448; stored value = fp8(x / scale).
#pragma once
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/backend/step_graphs.h"
#include "ops/ops.h"

namespace mx::cuda {

// A step's AttentionMeta copied to the device once (prepare) and used by every
// layer: per-sequence q_begin/num_new/num_cached, padded block tables and the
// new tokens' slots. Kernels index these; the host copy drives launch shapes.
struct DeviceAttentionMeta;
struct AttentionArgs;

// Which attention kernel runs (docs/cuda-attention.md). Auto: MLA decode
// batches (latent BF16/FP8 cache of 576/512, one new token per sequence, the
// sequence at row i) go to mla_decode (src/cuda/attention/mla_decode.h); steps
// with prefill rows to the tensor-core kernel when the head dims have an
// instance (32, 64, 128, and 192/128); the rest to the CUDA-core kernel (split
// over the keys when the step has few rows).
enum class AttentionKernel { Auto, Generic, TensorCore, MlaDecode };
// "auto" | "generic" | "tensor-core" | "mla-decode"
AttentionKernel parse_attention_kernel(const std::string& name);

class CudaAttention {
 public:
  CudaAttention(cudaStream_t stream, bool poison_outputs);
  ~CudaAttention();

  // Overrides the automatic choice (tests and benchmarks; TensorCore and
  // MlaDecode fall back to Generic where their kernel does not take the shape).
  void set_kernel(AttentionKernel k) { kernel_ = k; }

  // Where the step's metadata goes (CudaOps's StepGraphs: fixed addresses in
  // a static step); without it, an own StepGraphs that never records (fresh
  // buffers).
  void set_step_graphs(StepGraphs* graphs) { graphs_ = graphs; }
  void begin_step();
  void prepare(const AttentionMeta& meta);

  KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                           bool latent, DType dtype);
  void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots);
  Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta, float scale);
  Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table, int64_t num_tokens);
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale);

 private:
  const DeviceAttentionMeta& device_meta(const AttentionMeta& meta);
  const DeviceAttentionMeta* find_prepared_slots(const std::vector<int64_t>& slots) const;
  const int32_t* find_prepared_block_table(const std::vector<int32_t>& block_table) const;
  // Runs one attention over args (kernel choice, key splits, workspace).
  void run(const AttentionArgs& args, bool decode_only, const char* op);
  bool use_tensor_cores(const AttentionArgs& args, bool decode_only) const;
  bool use_mla_decode(const KvLayerCache& cache, const DeviceAttentionMeta& d) const;
  void run_mla_decode(const AttentionArgs& args, const KvLayerCache& cache, const DeviceAttentionMeta& d);
  void check_launch(const char* op);

  cudaStream_t stream_;
  bool poison_;
  AttentionKernel kernel_ = AttentionKernel::Auto;
  StepGraphs own_graphs_{stream_};
  StepGraphs* graphs_ = &own_graphs_;
  int num_sms_ = 132;
  std::map<const AttentionMeta*, std::unique_ptr<DeviceAttentionMeta>> prepared_;
  std::unique_ptr<DeviceAttentionMeta> adhoc_;
};

}  // namespace mx::cuda
