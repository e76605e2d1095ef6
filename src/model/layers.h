// Building blocks shared by the model families, written only against Ops so
// a backend implements ops, never models: SwiGLU MLP, MoE (routed + shared
// experts), GQA attention and MLA attention over the paged KV cache.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/causal_lm.h"
#include "ops/ops.h"
#include "quant/weight_loader.h"

namespace mx {

// What every layer of one step needs besides its input.
struct StepContext {
  std::vector<int32_t> positions;
  AttentionMeta attention;
  // The decode tokens (sequences with one new token) as their own batch, for
  // attention kernels that treat decode apart (MLA's absorbed form): their
  // rows in the step and the metadata with q_begin renumbered from 0.
  std::vector<int64_t> decode_rows;
  AttentionMeta decode;
};

DType kv_storage_dtype(KvCacheDtype dtype);  // Auto -> BF16
int64_t kv_element_bytes(DType dtype);

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  virtual Tensor forward(Ops& ops, const Tensor& h) const = 0;
};

class Attention {
 public:
  virtual ~Attention() = default;
  virtual Tensor forward(Ops& ops, const Tensor& h, const StepContext& step) = 0;
  virtual void allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) = 0;
  virtual int64_t kv_bytes_per_token(DType dtype) const = 0;
};

class SwiGluMlp : public FeedForward {
 public:
  SwiGluMlp(const WeightLoader& w, const std::string& prefix);
  Tensor forward(Ops& ops, const Tensor& h) const override;

 private:
  LinearWeight gate_, up_, down_;
};

// DeepSeek-V3 MoE: router (noaux_tc or softmax), routed experts, shared experts.
class Moe : public FeedForward {
 public:
  Moe(const WeightLoader& w, const ModelConfig& c, const std::string& prefix);
  Tensor forward(Ops& ops, const Tensor& h) const override;

 private:
  LinearWeight gate_;
  Tensor correction_bias_;
  std::vector<ExpertWeights> experts_;
  std::unique_ptr<SwiGluMlp> shared_;
  RoutingParams routing_;
  bool sigmoid_routing_ = true;
};

// Llama-style attention: q/k/v/o projections, neox RoPE, GQA over a paged cache.
class GqaAttention : public Attention {
 public:
  GqaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const RopeTable& rope);
  Tensor forward(Ops& ops, const Tensor& h, const StepContext& step) override;
  void allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) override;
  int64_t kv_bytes_per_token(DType dtype) const override;

 private:
  LinearWeight q_, k_, v_, o_;
  const RopeTable& rope_;
  int64_t heads_, kv_heads_, head_dim_;
  KvLayerCache cache_;
};

// Multi-head latent attention (kimi-k2.5.md §3): expanded form for prefill
// chunks, absorbed form (MQA over the 576-wide latent cache) for decode tokens,
// both with the same softmax scale.
class MlaAttention : public Attention {
 public:
  MlaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const RopeTable& rope);
  Tensor forward(Ops& ops, const Tensor& h, const StepContext& step) override;
  void allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) override;
  int64_t kv_bytes_per_token(DType dtype) const override;

 private:
  Tensor queries(Ops& ops, const Tensor& h) const;
  Tensor expanded(Ops& ops, const Tensor& q, const AttentionSeq& s) const;
  Tensor absorbed(Ops& ops, const Tensor& q, const AttentionMeta& meta) const;

  LinearWeight q_a_, q_b_, q_proj_, kv_a_, kv_b_, o_;
  Tensor q_a_norm_, kv_a_norm_;
  Tensor w_uk_, w_uv_;  // F32 [heads, nope|v, kv_lora]: kv_b_proj split per head for the absorbed form
  const RopeTable& rope_;
  int64_t heads_, nope_, rope_dim_, v_dim_, kv_lora_;
  float eps_, scale_;
  KvLayerCache cache_;
};

}  // namespace mx
