// The CPU reference backend: every op of ops.h in plain C++ with F32 math,
// split across cores with ThreadPool::global(). Internal to src/ops.
#pragma once
#include "ops/ops.h"

namespace mx {

class CpuOps : public Ops {
 public:
  explicit CpuOps(ActivationMode mode) : mode_(mode) {}

  Tensor empty(DType dtype, Shape shape) override { return Tensor::empty(dtype, std::move(shape)); }
  Tensor to_host(const Tensor& t) override { return t; }

  Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) override;
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override;
  Tensor add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) override;
  void add_inplace(Tensor& x, const Tensor& delta) override;
  void axpy_inplace(Tensor& x, const Tensor& delta, float scale) override;
  void rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                    int64_t head_stride, int64_t offset) override;
  Tensor silu_and_mul(const Tensor& gate, const Tensor& up) override;
  Tensor slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) override;
  Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) override;
  void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) override;
  Tensor concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) override;

  Tensor linear(const Tensor& x, const LinearWeight& w) override;
  Tensor head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) override;

  MoeRouting route_noaux_tc(const Tensor& router_logits, const Tensor& correction_bias,
                            const RoutingParams& p) override;
  MoeRouting route_softmax(const Tensor& router_logits, const RoutingParams& p) override;
  Tensor fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) override;

  KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                           bool latent, DType dtype) override;
  void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) override;
  Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta,
                         float scale) override;
  Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                         int64_t num_tokens) override;
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) override;

 private:
  ActivationMode mode_;
};

// Dot product of two F32 vectors with independent partial sums (vectorizes
// without -ffast-math).
inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Dot product of F32 activations with BF16 weights, widening on the fly
// (decode: no F32 copy of the weight row is written).
inline float dot_bf16(const float* a, const uint16_t* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * f32_from_bits(uint32_t(b[i + j]) << 16);
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * f32_from_bits(uint32_t(b[i]) << 16);
  return s;
}

// Checks an activation tensor is F32 and 2-D or more; returns the row count.
int64_t require_rows(const Tensor& x, const char* op);

}  // namespace mx
