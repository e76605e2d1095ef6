// CPU backend ops against straightforward reference computations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/thread_pool.h"
#include "ops/ops.h"
#include "quant/mxfp4.h"

namespace mx {
namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// y = x W^T in double from an already dequantized weight.
std::vector<double> ref_matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t t, int64_t n,
                               int64_t k) {
  std::vector<double> y(size_t(t * n));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t r = 0; r < n; ++r) {
      double s = 0;
      for (int64_t c = 0; c < k; ++c) s += double(x[size_t(i * k + c)]) * w[size_t(r * k + c)];
      y[size_t(i * n + r)] = s;
    }
  return y;
}

LinearWeight mxfp4_weight(int64_t n, int64_t k, uint32_t seed) {
  LinearWeight w{"test.mxfp4", WeightFormat::Mxfp4, n, k, 32, Tensor::empty(DType::U8, {n, k / 2}),
                 Tensor::empty(DType::U8, {n, k / 32}), Tensor(), true};
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < w.weight.numel(); ++i) w.weight.data<uint8_t>()[i] = uint8_t(rng() & 0xff);
  for (int64_t i = 0; i < w.scale.numel(); ++i) w.scale.data<uint8_t>()[i] = uint8_t(120 + rng() % 8);
  return w;
}

TEST(CpuOps, Mxfp4RowDequantizationMatchesTheFormat) {
  LinearWeight w = mxfp4_weight(2, 64, 1);
  w.weight.data<uint8_t>()[0] = 0x7a;  // element 0: code 0xa = -1.0 (low nibble), element 1: 0x7 = 6.0
  w.scale.data<uint8_t>()[0] = 126;    // 2^-1
  std::vector<float> rows(2 * 64);
  dequantize_rows(w, 0, 2, rows.data());
  EXPECT_EQ(rows[0], -0.5f);
  EXPECT_EQ(rows[1], 3.0f);
  uint8_t b = w.weight.data<uint8_t>()[64 / 2 + 20];  // row 1, elements 40, 41
  float s = std::ldexp(1.0f, int(w.scale.data<uint8_t>()[2 + 1]) - 127);
  EXPECT_EQ(rows[64 + 40], e2m1_to_f32(b & 0xf) * s);
  EXPECT_EQ(rows[64 + 41], e2m1_to_f32(b >> 4) * s);
}

TEST(CpuOps, Int4AndFp8RowDequantization) {
  LinearWeight i4{"test.int4", WeightFormat::Int4Group, 1, 64, 32, Tensor::empty(DType::I32, {1, 8}),
                  Tensor::empty(DType::BF16, {1, 2}), Tensor(), false};
  i4.weight.data<uint32_t>()[0] = 0x0000000fu;  // element 0: 15 - 8 = 7; elements 1..7: 0 - 8 = -8
  i4.weight.data<uint32_t>()[4] = 0x88888889u;  // element 32: 9 - 8 = 1
  i4.scale.data<uint16_t>()[0] = f32_to_bf16(0.5f);
  i4.scale.data<uint16_t>()[1] = f32_to_bf16(0.25f);
  std::vector<float> r(64);
  dequantize_rows(i4, 0, 1, r.data());
  EXPECT_EQ(r[0], 3.5f);
  EXPECT_EQ(r[1], -4.0f);
  EXPECT_EQ(r[32], 0.25f);
  EXPECT_EQ(r[33], 0.0f);

  LinearWeight f8{"test.fp8", WeightFormat::Fp8Block, 130, 256, 128, Tensor::empty(DType::F8E4M3, {130, 256}),
                  Tensor::from_f32({1, 2, 3, 4}, {2, 2}), Tensor(), false};
  for (int64_t i = 0; i < f8.weight.numel(); ++i) f8.weight.data<uint8_t>()[i] = f32_to_fp8e4m3(1.5f);
  std::vector<float> rows(2 * 256);
  dequantize_rows(f8, 128, 130, rows.data());  // second row block
  EXPECT_EQ(rows[0], 1.5f * 3);
  EXPECT_EQ(rows[200], 1.5f * 4);
}

TEST(CpuOps, LinearOverEveryFormatMatchesDoubleReference) {
  const int64_t t = 3, n = 37, k = 256;
  auto ops = make_cpu_ops(ActivationMode::W4A16);
  std::vector<float> xv = random_vec(t * k, 2);
  Tensor x = Tensor::from_f32(xv, {t, k});
  std::vector<LinearWeight> weights;
  weights.push_back(mxfp4_weight(n, k, 3));
  LinearWeight bf{"test.bf16", WeightFormat::Dense, n, k, 0, Tensor::from_f32(random_vec(n * k, 4), {n, k}).to(DType::BF16),
                  Tensor(), Tensor::from_f32(random_vec(n, 5), {n}), false};
  weights.push_back(bf);
  for (const LinearWeight& w : weights) {
    Tensor wf = dequantize_weight(w);
    std::vector<double> ref = ref_matmul(xv, wf.to_f32_vector(), t, n, k);
    Tensor y = ops->linear(x, w);
    for (int64_t i = 0; i < t * n; ++i) {
      double b = w.bias.defined() ? w.bias.get_f32(i % n) : 0.0;
      EXPECT_NEAR(y.data<float>()[i], ref[size_t(i)] + b, 1e-4 * (1 + std::fabs(ref[size_t(i)]))) << w.name << " " << i;
    }
  }
}

TEST(CpuOps, W4A4QuantizesOnlyFlaggedMxfp4Inputs) {
  const int64_t t = 2, n = 8, k = 64;
  auto w4a4 = make_cpu_ops(ActivationMode::W4A4);
  auto w4a16 = make_cpu_ops(ActivationMode::W4A16);
  std::vector<float> xv = random_vec(t * k, 7);
  Tensor x = Tensor::from_f32(xv, {t, k});
  LinearWeight w = mxfp4_weight(n, k, 8);
  std::vector<float> xq = xv;
  mxfp4_qdq_activation_inplace(xq.data(), int64_t(xq.size()));
  std::vector<double> ref = ref_matmul(xq, dequantize_weight(w).to_f32_vector(), t, n, k);
  Tensor y = w4a4->linear(x, w);
  for (int64_t i = 0; i < t * n; ++i) EXPECT_NEAR(y.data<float>()[i], ref[size_t(i)], 1e-4 * (1 + std::fabs(ref[size_t(i)])));
  w.quantize_input = false;  // excluded Linear: W4A4 leaves its input alone
  Tensor a = w4a4->linear(x, w), b = w4a16->linear(x, w);
  EXPECT_EQ(a.to_f32_vector(), b.to_f32_vector());
}

TEST(CpuOps, Mxfp4ActivationQdqFollowsTheReferenceAlgorithm) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;   // amax 1 -> e_s = -2: 1.0 -> 4 * 2^-2 exactly
  x[1] = 0.3f;   // 0.3 / 0.25 = 1.2 -> 1.0 -> 0.25
  x[2] = -0.1f;  // 0.4 -> 0.5 -> 0.125
  mxfp4_qdq_activation_inplace(x.data(), 32);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 0.25f);
  EXPECT_EQ(x[2], -0.125f);
  std::vector<float> y(32, 0.0f);
  y[0] = 1.75f;  // mantissa >= 1.75: amax rounds to 2 -> e_s = -1; 1.75/0.5 = 3.5 -> tie -> 4 (even) -> 2.0
  y[1] = 0.75f;  // 1.5 -> 0.75
  mxfp4_qdq_activation_inplace(y.data(), 32);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], 0.75f);
  std::vector<float> z(32, 0.0f);  // zero block stays zero
  mxfp4_qdq_activation_inplace(z.data(), 32);
  for (float v : z) EXPECT_EQ(v, 0.0f);
}

TEST(CpuOps, YarnRopeMatchesTheDocumentedKimiNumbers) {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 64;
  s.original_max_position_embeddings = 4096;
  s.mscale = 1;
  s.mscale_all_dim = 1;
  RopeTable t = make_rope_table(s, 50000.0, 64, 262144, RopeTable::Style::Interleaved);
  ASSERT_EQ(t.inv_freq.size(), 32u);
  EXPECT_FLOAT_EQ(t.attention_factor, 1.0f);
  // low = 8, high = 20: dims below 8 keep theta^(-2i/64), dims from 20 are divided by 64.
  for (int i : {0, 7}) EXPECT_FLOAT_EQ(t.inv_freq[size_t(i)], float(std::pow(50000.0, -2.0 * i / 64)));
  for (int i : {20, 31}) EXPECT_FLOAT_EQ(t.inv_freq[size_t(i)], float(std::pow(50000.0, -2.0 * i / 64) / 64));
  EXPECT_FLOAT_EQ(t.inv_freq[14], float(std::pow(50000.0, -28.0 / 64) * (1 - 0.5 + 0.5 / 64)));
  double m = yarn_mscale(64, 1.0);
  EXPECT_NEAR(m * m / std::sqrt(192.0), 0.14467963, 1e-7);
}

TEST(CpuOps, InterleavedRopeIsNeoxOnPermutedDims) {
  auto ops = make_cpu_ops(ActivationMode::W4A16);
  RopeTable inter = make_rope_table(RopeScaling{}, 10000, 8, 4096, RopeTable::Style::Interleaved);
  RopeTable neox = inter;
  neox.style = RopeTable::Style::Neox;
  std::vector<float> v = random_vec(2 * 8, 9);
  std::vector<float> perm(v.size());  // [evens | odds] per row
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      perm[size_t(r * 8 + i)] = v[size_t(r * 8 + 2 * i)];
      perm[size_t(r * 8 + 4 + i)] = v[size_t(r * 8 + 2 * i + 1)];
    }
  Tensor a = Tensor::from_f32(v, {2, 8}), b = Tensor::from_f32(perm, {2, 8});
  ops->rope_inplace(a, {3, 17}, inter, 1, 8, 0);
  ops->rope_inplace(b, {3, 17}, neox, 1, 8, 0);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      EXPECT_FLOAT_EQ(a.data<float>()[r * 8 + 2 * i], b.data<float>()[r * 8 + i]);
      EXPECT_FLOAT_EQ(a.data<float>()[r * 8 + 2 * i + 1], b.data<float>()[r * 8 + 4 + i]);
    }
  EXPECT_NE(a.data<float>()[8], v[8]);  // position 17 really rotates
}

TEST(CpuOps, NoauxTcRoutingWithGroupsAndBias) {
  auto ops = make_cpu_ops(ActivationMode::W4A16);
  // 8 experts in 4 groups of 2, keep 2 groups, top-2.
  std::vector<float> logits = {2.0f, -4.0f, 0.5f, 0.4f, 3.0f, -3.0f, 0.0f, 0.1f};
  std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, -2.0f, 0.0f, 0.0f, 0.0f};
  RoutingParams p{2, 4, 2, true, 2.5f};
  MoeRouting r = ops->route_noaux_tc(Tensor::from_f32(logits, {1, 8}), Tensor::from_f32(bias, {8}), p);
  auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  // Biased group scores (top-2 sums): g0 = s(2)+s(-4), g1 = s(.5)+s(.4), g2 = s(3)-2+s(-3), g3 = s(0)+s(.1).
  // Kept: g1 and g3; best two biased experts among {2,3,6,7}: 2 and 3 (ungrouped, expert 0 would win).
  ASSERT_EQ(r.expert_ids.numel(), 2);
  EXPECT_EQ(r.expert_ids.data<int32_t>()[0], 2);
  EXPECT_EQ(r.expert_ids.data<int32_t>()[1], 3);
  float s2 = sig(0.5f), s3 = sig(0.4f);
  EXPECT_NEAR(r.weights.data<float>()[0], s2 / (s2 + s3) * 2.5f, 1e-6);
  EXPECT_NEAR(r.weights.data<float>()[1], s3 / (s2 + s3) * 2.5f, 1e-6);
}

TEST(CpuOps, FusedMoeEqualsWeightedSumOfExperts) {
  auto ops = make_cpu_ops(ActivationMode::W4A16);
  const int64_t hidden = 64, inter = 32, tokens = 3;
  std::vector<ExpertWeights> experts;
  for (int e = 0; e < 4; ++e)
    experts.push_back({mxfp4_weight(inter, hidden, 10 + e), mxfp4_weight(inter, hidden, 20 + e),
                       mxfp4_weight(hidden, inter, 30 + e)});
  Tensor x = Tensor::from_f32(random_vec(tokens * hidden, 11, 0.1f), {tokens, hidden});
  const std::vector<int32_t> ids = {0, 3, 1, 3, 2, 0};
  const std::vector<float> weights = {0.5f, 1.5f, 1.0f, -0.5f, 0.25f, 2.0f};
  MoeRouting r{2, Tensor::empty(DType::I32, {tokens, 2}), Tensor::from_f32(weights, {tokens, 2})};
  std::copy(ids.begin(), ids.end(), r.expert_ids.data<int32_t>());
  Tensor y = ops->fused_moe(x, experts, r);
  for (int64_t t = 0; t < tokens; ++t) {
    Tensor xt = x.slice_rows(t, t + 1).clone();
    std::vector<double> ref(size_t(hidden), 0.0);
    for (int j = 0; j < 2; ++j) {
      const ExpertWeights& e = experts[size_t(ids[size_t(t * 2 + j)])];
      Tensor o = ops->linear(ops->silu_and_mul(ops->linear(xt, e.gate), ops->linear(xt, e.up)), e.down);
      for (int64_t c = 0; c < hidden; ++c) ref[size_t(c)] += weights[size_t(t * 2 + j)] * o.data<float>()[c];
    }
    for (int64_t c = 0; c < hidden; ++c) EXPECT_NEAR(y.data<float>()[t * hidden + c], ref[size_t(c)], 1e-4);
  }
}

// Paged attention over a scrambled block table equals dense causal attention.
TEST(CpuOps, PagedAttentionMatchesDenseAttentionAndFp8StaysClose) {
  const int64_t heads = 4, kv_heads = 2, dim = 16, cached = 5, fresh = 3, ctx = cached + fresh, bs = 2;
  std::vector<int32_t> table = {3, 0, 5, 1};
  std::vector<int64_t> slots;
  for (int64_t i = 0; i < ctx; ++i) slots.push_back(table[size_t(i / bs)] * bs + i % bs);
  Tensor k = Tensor::from_f32(random_vec(ctx * kv_heads * dim, 12), {ctx, kv_heads, dim});
  Tensor v = Tensor::from_f32(random_vec(ctx * kv_heads * dim, 13), {ctx, kv_heads, dim});
  Tensor q = Tensor::from_f32(random_vec(fresh * heads * dim, 14), {fresh, heads, dim});
  AttentionMeta meta{bs, {{0, fresh, cached, table}}, {}};
  auto ops = make_cpu_ops(ActivationMode::W4A16);
  Tensor dense = ops->attention(q, k, v, 0.25f);
  std::vector<float> ref = dense.to_f32_vector();
  for (DType dt : {DType::F32, DType::BF16, DType::F8E4M3}) {
    KvLayerCache c = ops->allocate_kv(6, bs, kv_heads, dim, dim, false, dt);
    ops->store_kv(c, k, v, slots);
    Tensor out = ops->paged_attention(q, c, meta, 0.25f);
    float tol = dt == DType::F32 ? 1e-6f : dt == DType::BF16 ? 2e-2f : 1e-1f;
    double err = 0;
    for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, double(std::fabs(out.data<float>()[i] - ref[i])));
    EXPECT_LE(err, tol) << dtype_name(dt);
  }
  // Causality: the first new token must not see the two after it.
  Tensor k2 = k.clone();
  for (int64_t i = (cached + 1) * kv_heads * dim; i < k2.numel(); ++i) k2.data<float>()[i] = 100.0f;
  Tensor d2 = ops->attention(q, k2, v, 0.25f);
  for (int64_t i = 0; i < heads * dim; ++i) EXPECT_EQ(d2.data<float>()[i], dense.data<float>()[i]);
}

TEST(CpuOps, ResultsDoNotDependOnThreadCount) {
  LinearWeight w = mxfp4_weight(100, 128, 15);
  Tensor x = Tensor::from_f32(random_vec(4 * 128, 16), {4, 128});
  ThreadPool::set_global_threads(1);
  auto y1 = make_cpu_ops(ActivationMode::W4A4)->linear(x, w).to_f32_vector();
  ThreadPool::set_global_threads(3);
  auto y3 = make_cpu_ops(ActivationMode::W4A4)->linear(x, w).to_f32_vector();
  ThreadPool::set_global_threads(0);
  EXPECT_EQ(y1, y3);
}

}  // namespace
}  // namespace mx
