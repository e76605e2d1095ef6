#include "model/layers.h"

#include <cmath>

#include "core/error.h"

namespace mx {

DType kv_storage_dtype(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::Auto:
    case KvCacheDtype::BF16: return DType::BF16;
    case KvCacheDtype::FP8: return DType::F8E4M3;
    case KvCacheDtype::F32: return DType::F32;
  }
  fail("unknown KV cache dtype");
}

int64_t kv_element_bytes(DType dtype) { return int64_t(dtype_size(dtype)); }

// ---------------------------------------------------------------- SwiGluMlp

SwiGluMlp::SwiGluMlp(const WeightLoader& w, const std::string& prefix, const ShardSpec& shard)
    : gate_(column_parallel(w.linear(prefix + ".gate_proj"), shard)),
      up_(column_parallel(w.linear(prefix + ".up_proj"), shard)),
      down_(row_parallel(w.linear(prefix + ".down_proj"), shard)) {}

Tensor SwiGluMlp::forward(Ops& ops, const Tensor& h) const {
  return ops.linear(ops.silu_and_mul(ops.linear(h, gate_), ops.linear(h, up_)), down_);
}

// ---------------------------------------------------------------- Moe

Moe::Moe(const WeightLoader& w, const ModelConfig& c, const std::string& prefix, const ShardSpec& shard)
    : gate_(w.linear(prefix + ".gate")) {
  if (w.has(prefix + ".gate.e_score_correction_bias")) correction_bias_ = w.tensor(prefix + ".gate.e_score_correction_bias");
  // Expert parallel: only experts [owned_begin, owned_end) are read; the rest
  // share one all-zero expert (routing still sees all experts).
  auto [owned_begin, owned_end] = shard.expert_parallel && shard.sharded()
                                      ? shard.part(c.n_routed_experts, prefix + ": n_routed_experts")
                                      : std::pair<int64_t, int64_t>{0, c.n_routed_experts};
  auto expert = [&](int64_t e) {
    std::string p = prefix + ".experts." + std::to_string(e);
    if (shard.expert_parallel)
      return ExpertWeights{w.linear(p + ".gate_proj"), w.linear(p + ".up_proj"), w.linear(p + ".down_proj")};
    // Only this rank's slice of each expert is read (made, for dummy weights).
    return ExpertWeights{load_column_parallel(w, p + ".gate_proj", shard), load_column_parallel(w, p + ".up_proj", shard),
                         load_row_parallel(w, p + ".down_proj", shard)};
  };
  experts_.resize(size_t(c.n_routed_experts));
  for (int64_t e = owned_begin; e < owned_end; ++e) experts_[size_t(e)] = expert(e);
  if (owned_end - owned_begin < c.n_routed_experts && owned_end > owned_begin) {
    const ExpertWeights& x = experts_[size_t(owned_begin)];
    ExpertWeights zero{zero_linear_like(x.gate), zero_linear_like(x.up), zero_linear_like(x.down)};
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      if (e < owned_begin || e >= owned_end) experts_[size_t(e)] = zero;
  }
  if (c.n_shared_experts > 0) shared_ = std::make_unique<SwiGluMlp>(w, prefix + ".shared_experts", shard);
  routing_.top_k = c.num_experts_per_tok;
  routing_.n_group = std::max<int64_t>(1, c.n_group);
  routing_.topk_group = std::max<int64_t>(1, c.topk_group);
  routing_.normalize = c.norm_topk_prob;
  routing_.routed_scaling_factor = float(c.routed_scaling_factor);
  if (c.scoring_func == "softmax") {
    sigmoid_routing_ = false;
  } else if (c.scoring_func != "sigmoid") {
    fail_input("{}: unsupported MoE scoring_func '{}' (sigmoid or softmax)", prefix, c.scoring_func);
  }
}

Tensor Moe::forward(Ops& ops, const Tensor& h) const {
  Tensor logits = ops.linear(h, gate_);
  MoeRouting r = sigmoid_routing_ ? ops.route_noaux_tc(logits, correction_bias_, routing_)
                                  : ops.route_softmax(logits, routing_);
  Tensor y = ops.fused_moe(h, experts_, r);
  if (shared_) ops.add_inplace(y, shared_->forward(ops, h));
  return y;
}

// ---------------------------------------------------------------- GqaAttention

GqaAttention::GqaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix,
                           const RopeTable& rope, const ShardSpec& shard)
    : q_(w.linear(prefix + ".q_proj")),
      k_(w.linear(prefix + ".k_proj")),
      v_(w.linear(prefix + ".v_proj")),
      o_(w.linear(prefix + ".o_proj")),
      rope_(rope),
      heads_(c.num_heads),
      kv_heads_(c.num_kv_heads > 0 ? c.num_kv_heads : c.num_heads),
      head_dim_(c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_heads) {
  if (heads_ % kv_heads_ != 0) fail_input("{}: {} heads not divisible by {} KV heads", prefix, heads_, kv_heads_);
  if (q_.out_features != heads_ * head_dim_ || k_.out_features != kv_heads_ * head_dim_)
    fail_input("{}: q_proj/k_proj outputs {}/{} do not match {} heads, {} KV heads of {}", prefix, q_.out_features,
               k_.out_features, heads_, kv_heads_, head_dim_);
  if (shard.sharded()) shard_heads(shard, prefix);
}

void GqaAttention::shard_heads(const ShardSpec& shard, const std::string& prefix) {
  const int64_t group = heads_ / kv_heads_;  // query heads per KV head
  auto [q_begin, q_end] = shard.part(heads_, prefix + ": num_attention_heads");
  q_ = column_parallel(q_, shard, head_dim_);
  o_ = row_parallel(o_, shard, head_dim_);
  if (kv_heads_ % shard.world == 0) {
    k_ = column_parallel(k_, shard, head_dim_);
    v_ = column_parallel(v_, shard, head_dim_);
    kv_heads_ /= shard.world;
  } else {
    // Fewer KV heads than ranks: this rank's query heads all read one KV head.
    if (shard.world % kv_heads_ != 0)
      fail_input("{}: {} KV heads neither split over nor replicate onto {} ranks", prefix, kv_heads_, shard.world);
    const int64_t kv = q_begin / group;
    k_ = slice_out_features(k_, kv * head_dim_, (kv + 1) * head_dim_);
    v_ = slice_out_features(v_, kv * head_dim_, (kv + 1) * head_dim_);
    kv_heads_ = 1;
  }
  heads_ = q_end - q_begin;
}

Tensor GqaAttention::forward(Ops& ops, const Tensor& h, const StepContext& step) {
  const int64_t tokens = h.dim(0);
  Tensor q = ops.linear(h, q_), k = ops.linear(h, k_), v = ops.linear(h, v_);
  ops.rope_inplace(q, step.positions, rope_, heads_, head_dim_, 0);
  ops.rope_inplace(k, step.positions, rope_, kv_heads_, head_dim_, 0);
  ops.store_kv(cache_, k, v, step.attention.slots);
  Tensor o = ops.paged_attention(q.reshape({tokens, heads_, head_dim_}), cache_, step.attention,
                                 float(1.0 / std::sqrt(double(head_dim_))));
  return ops.linear(o.reshape({tokens, heads_ * head_dim_}), o_);
}

void GqaAttention::allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) {
  cache_ = ops.allocate_kv(num_blocks, block_size, kv_heads_, head_dim_, head_dim_, false, dtype);
}

int64_t GqaAttention::kv_bytes_per_token(DType dtype) const {
  return 2 * kv_heads_ * head_dim_ * kv_element_bytes(dtype) + (dtype == DType::F8E4M3 ? 2 * 4 : 0);
}

// ---------------------------------------------------------------- MlaAttention

MlaAttention::MlaAttention(const WeightLoader& w, const ModelConfig& c, const std::string& prefix,
                           const RopeTable& rope, const ShardSpec& shard)
    : kv_a_(w.linear(prefix + ".kv_a_proj_with_mqa")),
      kv_b_(w.linear(prefix + ".kv_b_proj")),
      o_(w.linear(prefix + ".o_proj")),
      kv_a_norm_(w.tensor(prefix + ".kv_a_layernorm.weight")),
      rope_(rope),
      heads_(c.num_heads),
      nope_(c.qk_nope_head_dim),
      rope_dim_(c.qk_rope_head_dim),
      v_dim_(c.v_head_dim),
      kv_lora_(c.kv_lora_rank),
      eps_(float(c.rms_norm_eps)) {
  if (c.q_lora_rank > 0) {
    q_a_ = w.linear(prefix + ".q_a_proj");
    q_b_ = w.linear(prefix + ".q_b_proj");
    q_a_norm_ = w.tensor(prefix + ".q_a_layernorm.weight");
  } else {
    q_proj_ = w.linear(prefix + ".q_proj");
  }
  if (kv_a_.out_features != kv_lora_ + rope_dim_ || kv_b_.out_features != heads_ * (nope_ + v_dim_))
    fail_input("{}: kv_a_proj_with_mqa [{}] / kv_b_proj [{}] do not match kv_lora_rank {}, rope {}, {} heads", prefix,
               kv_a_.out_features, kv_b_.out_features, kv_lora_, rope_dim_, heads_);
  if (shard.sharded()) {  // this rank's heads: [begin, end) of heads_
    auto [begin, end] = shard.part(heads_, prefix + ": num_attention_heads");
    if (q_b_.defined()) q_b_ = column_parallel(q_b_, shard, nope_ + rope_dim_);
    if (q_proj_.defined()) q_proj_ = column_parallel(q_proj_, shard, nope_ + rope_dim_);
    kv_b_ = column_parallel(kv_b_, shard, nope_ + v_dim_);
    o_ = row_parallel(o_, shard, v_dim_);
    heads_ = end - begin;
  }
  // Absorbed form: kv_b_proj viewed [heads, nope + v, kv_lora], split per head.
  Tensor kv_b = dequantize_weight(kv_b_);
  w_uk_ = Tensor::empty(DType::F32, {heads_, nope_, kv_lora_});
  w_uv_ = Tensor::empty(DType::F32, {heads_, v_dim_, kv_lora_});
  for (int64_t h = 0; h < heads_; ++h) {
    const float* src = kv_b.data<float>() + h * (nope_ + v_dim_) * kv_lora_;
    std::copy(src, src + nope_ * kv_lora_, w_uk_.data<float>() + h * nope_ * kv_lora_);
    std::copy(src + nope_ * kv_lora_, src + (nope_ + v_dim_) * kv_lora_, w_uv_.data<float>() + h * v_dim_ * kv_lora_);
  }
  // Softmax scale: (nope + rope)^-1/2 times YaRN's m^2 (kimi-k2.5.md §3).
  double scale = 1.0 / std::sqrt(double(nope_ + rope_dim_));
  const RopeScaling& rs = c.rope_scaling;
  if (!rs.type.empty() && rs.type != "default" && rs.mscale_all_dim != 0) {
    double m = yarn_mscale(rs.factor, rs.mscale_all_dim);
    scale *= m * m;
  }
  scale_ = float(scale);
}

Tensor MlaAttention::queries(Ops& ops, const Tensor& h) const {
  if (!q_a_.defined()) return ops.linear(h, q_proj_);
  return ops.linear(ops.rms_norm(ops.linear(h, q_a_), q_a_norm_, eps_), q_b_);
}

Tensor MlaAttention::forward(Ops& ops, const Tensor& h, const StepContext& step) {
  const int64_t tokens = h.dim(0), qk = nope_ + rope_dim_;
  Tensor q = queries(ops, h);  // [tokens, heads * (nope + rope)]
  ops.rope_inplace(q, step.positions, rope_, heads_, qk, nope_);
  Tensor a = ops.linear(h, kv_a_);  // [tokens, kv_lora + rope]
  Tensor c_kv = ops.rms_norm(ops.slice_cols(a, 1, 0, kv_lora_), kv_a_norm_, eps_);
  Tensor k_pe = ops.slice_cols(a, 1, kv_lora_, kv_lora_ + rope_dim_);
  ops.rope_inplace(k_pe, step.positions, rope_, 1, rope_dim_, 0);
  ops.store_kv(cache_, ops.concat_cols(c_kv, k_pe, 1, true), Tensor(), step.attention.slots);

  // Decode tokens (one new token) take the absorbed form together; prefill
  // chunks take the expanded form one sequence at a time. A decode-only step
  // needs no gather or scatter: its decode rows are all rows, in order.
  if (int64_t(step.decode_rows.size()) == tokens) return ops.linear(absorbed(ops, q, step.decode), o_);
  Tensor out = ops.empty(DType::F32, {tokens, heads_ * v_dim_});
  for (const AttentionSeq& s : step.attention.seqs) {
    if (s.num_new <= 1) continue;
    std::vector<int64_t> rows(size_t(s.num_new));
    for (int64_t i = 0; i < s.num_new; ++i) rows[size_t(i)] = s.q_begin + i;
    ops.scatter_rows(out, rows, expanded(ops, q, s));
  }
  if (!step.decode_rows.empty())
    ops.scatter_rows(out, step.decode_rows, absorbed(ops, ops.gather_rows(q, step.decode_rows), step.decode));
  return ops.linear(out, o_);
}

Tensor MlaAttention::expanded(Ops& ops, const Tensor& q, const AttentionSeq& s) const {
  const int64_t ctx = s.num_cached + s.num_new, qk = nope_ + rope_dim_;
  Tensor latent = ops.gather_cached_k(cache_, s.block_table, ctx).reshape({ctx, kv_lora_ + rope_dim_});
  Tensor kv = ops.linear(ops.slice_cols(latent, 1, 0, kv_lora_), kv_b_);  // [ctx, heads * (nope + v)]
  Tensor k = ops.concat_cols(ops.slice_cols(kv, heads_, 0, nope_),
                             ops.slice_cols(latent, 1, kv_lora_, kv_lora_ + rope_dim_), heads_, true);
  Tensor v = ops.slice_cols(kv, heads_, nope_, nope_ + v_dim_).reshape({ctx, heads_, v_dim_});
  Tensor qs = q.slice_rows(s.q_begin, s.q_begin + s.num_new).reshape({s.num_new, heads_, qk});
  return ops.attention(qs, k, v, scale_).reshape({s.num_new, heads_ * v_dim_});
}

Tensor MlaAttention::absorbed(Ops& ops, const Tensor& q, const AttentionMeta& meta) const {
  const int64_t tokens = q.dim(0);
  // q~ = W_UK^T q_nope per head; q' = [q~ ; q_pe] against [c_kv ; k_pe].
  Tensor q_nope = ops.slice_cols(q, heads_, 0, nope_).reshape({tokens, heads_, nope_});
  Tensor q_lat = ops.head_matmul(q_nope, w_uk_, true);  // [tokens, heads, kv_lora]
  Tensor q_full = ops.concat_cols(q_lat.reshape({tokens, heads_ * kv_lora_}),
                                  ops.slice_cols(q, heads_, nope_, nope_ + rope_dim_), heads_, false);
  Tensor o_lat = ops.paged_attention(q_full, cache_, meta, scale_);  // [tokens, heads, kv_lora]
  return ops.head_matmul(o_lat, w_uv_, false).reshape({tokens, heads_ * v_dim_});
}

void MlaAttention::allocate(Ops& ops, int64_t num_blocks, int64_t block_size, DType dtype) {
  cache_ = ops.allocate_kv(num_blocks, block_size, 1, kv_lora_ + rope_dim_, kv_lora_, true, dtype);
}

int64_t MlaAttention::kv_bytes_per_token(DType dtype) const {
  return (kv_lora_ + rope_dim_) * kv_element_bytes(dtype) + (dtype == DType::F8E4M3 ? 4 : 0);
}

}  // namespace mx
