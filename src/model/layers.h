// Building blocks shared by the model families, written only against Ops so
// a backend implements ops, never models: SwiGLU MLP, MoE (routed + shared
// experts), GQA attention and MLA attention over the paged KV cache.
// Under tensor parallelism (dist/shard.h) each block loads its rank's slice of
// the weights and returns a partial output that DecoderModel sums over the
// ranks (one all_reduce per block); the forward code is the same.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/shard.h"
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
  // gate/up column-parallel, down row-parallel.
  SwiGluMlp(const WeightLoader& w, const std::string& prefix, const ShardSpec& shard = {});
  Tensor forward(Ops& ops, const Tensor& h) const override;

 private:
  LinearWeight gate_, up_, down_;
};

// DeepSeek-V3 MoE: router (noaux_tc or softmax), routed experts, shared experts.
// Sharded: the router is replicated, shared experts split like SwiGluMlp, and
// routed experts either split the same way (TP-MoE) or, with
// shard.expert_parallel, owned whole by one rank each; the experts of other
// ranks are one shared all-zero expert, so they add exactly 0 here.
class Moe : public FeedForward {
 public:
  Moe(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const ShardSpec& shard = {});
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
// Sharded: query heads split over the ranks, KV heads split too or, when
// there are fewer KV heads than ranks, each rank keeps the one its queries use.
class GqaAttention : public Attention {
 public:
  GqaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const RopeTable& rope,
               const ShardSpec& shard = {});
  Tensor forward(Ops& ops, const Tensor& h, const StepContext& step) override;
  void allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) override;
  int64_t kv_bytes_per_token(DType dtype) const override;

 private:
  void shard_heads(const ShardSpec& shard, const std::string& prefix);
  LinearWeight q_, k_, v_, o_;
  const RopeTable& rope_;
  int64_t heads_, kv_heads_, head_dim_;
  KvLayerCache cache_;
};

// Multi-head latent attention (kimi-k2.5.md §3): expanded form for prefill
// chunks, absorbed form (MQA over the 576-wide latent cache) for decode tokens,
// both with the same softmax scale. Sharded: heads split over the ranks
// (q_b/q_proj and kv_b by head, o_proj's inputs by head); the low-rank
// q_a/kv_a projections and the latent cache are replicated.
class MlaAttention : public Attention {
 public:
  MlaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const RopeTable& rope,
               const ShardSpec& shard = {});
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
