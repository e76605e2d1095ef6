// MoE routing (DeepSeek-V3 noaux_tc sigmoid routing and softmax top-k) and
// the fused expert computation of the CPU backend (kimi-k2.5.md §3).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "ops/cpu_ops.h"

namespace mx {

namespace {

// Indices of the k largest values (ties: lower index first), in descending order.
std::vector<int32_t> top_k_indices(const std::vector<float>& v, int64_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b);
  });
  idx.resize(size_t(k));
  return idx;
}

// Keeps the topk_group groups with the largest sum of their two best scores
// and sets every expert of the other groups to -inf (selection only).
void mask_groups(std::vector<float>& choice, int64_t n_group, int64_t topk_group) {
  const int64_t per = int64_t(choice.size()) / n_group;
  std::vector<float> group_score(static_cast<size_t>(n_group));
  for (int64_t g = 0; g < n_group; ++g) {
    std::vector<float> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
    auto best = top_k_indices(members, std::min<int64_t>(2, per));
    float s = 0;
    for (int32_t i : best) s += members[size_t(i)];
    group_score[size_t(g)] = s;
  }
  auto keep = top_k_indices(group_score, topk_group);
  for (int64_t g = 0; g < n_group; ++g) {
    if (std::find(keep.begin(), keep.end(), int32_t(g)) != keep.end()) continue;
    std::fill(choice.begin() + g * per, choice.begin() + (g + 1) * per, -std::numeric_limits<float>::infinity());
  }
}

void check_routing(const Tensor& logits, const RoutingParams& p) {
  const int64_t experts = logits.dim(1);
  MX_CHECK(p.top_k > 0 && p.top_k <= experts, "routing: top_k {} of {} experts", p.top_k, experts);
  MX_CHECK(p.n_group >= 1 && experts % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group,
           "routing: {} experts in {} groups, keeping {}", experts, p.n_group, p.topk_group);
}

void finish_weights(MoeRouting& r, int64_t t, const std::vector<float>& prob, const std::vector<int32_t>& idx,
                    const RoutingParams& p) {
  double sum = 0;
  for (int32_t e : idx) sum += prob[size_t(e)];
  for (int64_t j = 0; j < p.top_k; ++j) {
    float w = prob[size_t(idx[size_t(j)])];
    if (p.normalize) w = float(w / (sum + 1e-20));
    r.expert_ids.data<int32_t>()[t * p.top_k + j] = idx[size_t(j)];
    r.weights.data<float>()[t * p.top_k + j] = w * p.routed_scaling_factor;
  }
}

}  // namespace

MoeRouting CpuOps::route_noaux_tc(const Tensor& router_logits, const Tensor& correction_bias,
                                  const RoutingParams& p) {
  const int64_t tokens = require_rows(router_logits, "route_noaux_tc"), experts = router_logits.dim(1);
  check_routing(router_logits, p);
  MX_CHECK(!correction_bias.defined() || correction_bias.numel() == experts, "correction bias {} for {} experts",
           correction_bias.describe(), experts);
  MoeRouting r{p.top_k, Tensor::empty(DType::I32, {tokens, p.top_k}), Tensor::empty(DType::F32, {tokens, p.top_k})};
  std::vector<float> score(static_cast<size_t>(experts)), choice(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      float s = 1.0f / (1.0f + std::exp(-router_logits.data<float>()[t * experts + e]));
      score[size_t(e)] = s;
      choice[size_t(e)] = s + (correction_bias.defined() ? correction_bias.get_f32(e) : 0.0f);
    }
    if (p.n_group > 1) mask_groups(choice, p.n_group, p.topk_group);
    finish_weights(r, t, score, top_k_indices(choice, p.top_k), p);
  }
  return r;
}

MoeRouting CpuOps::route_softmax(const Tensor& router_logits, const RoutingParams& p) {
  const int64_t tokens = require_rows(router_logits, "route_softmax"), experts = router_logits.dim(1);
  check_routing(router_logits, p);
  MoeRouting r{p.top_k, Tensor::empty(DType::I32, {tokens, p.top_k}), Tensor::empty(DType::F32, {tokens, p.top_k})};
  std::vector<float> prob(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = router_logits.data<float>() + t * experts;
    float mx = *std::max_element(l, l + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += prob[size_t(e)] = std::exp(l[e] - mx);
    for (float& v : prob) v = float(v / sum);
    finish_weights(r, t, prob, top_k_indices(prob, p.top_k), p);
  }
  return r;
}

Tensor CpuOps::fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) {
  const int64_t tokens = require_rows(x, "fused_moe"), hidden = x.numel() / std::max<int64_t>(tokens, 1);
  MX_CHECK(r.expert_ids.defined() && r.weights.defined() && r.expert_ids.numel() == tokens * r.top_k &&
               r.weights.numel() == tokens * r.top_k,
           "fused_moe: routing {} for input {} with top_k {}",
           r.expert_ids.defined() ? r.expert_ids.describe() : "undefined", x.describe(), r.top_k);
  // Tokens (and their weights) per expert, so each expert's weights are read once.
  std::vector<std::vector<int64_t>> rows(experts.size());
  std::vector<std::vector<float>> weights(experts.size());
  for (int64_t i = 0; i < tokens * r.top_k; ++i) {
    int32_t e = r.expert_ids.data<int32_t>()[i];
    MX_CHECK(e >= 0 && size_t(e) < experts.size(), "fused_moe: expert {} of {}", e, experts.size());
    rows[size_t(e)].push_back(i / r.top_k);
    weights[size_t(e)].push_back(r.weights.data<float>()[i]);
  }
  Tensor out = Tensor::zeros(DType::F32, {tokens, hidden});
  for (size_t e = 0; e < experts.size(); ++e) {
    if (rows[e].empty()) continue;
    Tensor xe = gather_rows(x, rows[e]);
    Tensor h = silu_and_mul(linear(xe, experts[e].gate), linear(xe, experts[e].up));
    Tensor y = linear(h, experts[e].down);
    for (size_t i = 0; i < rows[e].size(); ++i) {
      float* o = out.data<float>() + rows[e][i] * hidden;
      const float* yi = y.data<float>() + int64_t(i) * hidden;
      for (int64_t c = 0; c < hidden; ++c) o[c] += weights[e][i] * yi[c];
    }
  }
  return out;
}

}  // namespace mx
