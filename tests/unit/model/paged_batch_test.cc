// Paged KV and batching invariants of the models on the CPU backend: a step
// mixing prefill chunks and decode tokens of several sequences gives the same
// logits as running each sequence alone; chunked prefill equals one-step
// prefill; FP8 and BF16 KV caches stay close to the F32 cache.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "model/greedy.h"
#include "model_test_util.h"

namespace mx {
namespace {

constexpr int64_t kBlock = 4;

std::vector<float> row(const Tensor& logits, int64_t r) {
  const int64_t v = logits.dim(1);
  return std::vector<float>(logits.data<float>() + r * v, logits.data<float>() + (r + 1) * v);
}

// Adds `count` tokens of a sequence to a batch.
void add(ForwardBatch& b, const std::vector<int32_t>& ids, int64_t cached, int64_t count,
         const std::vector<int32_t>& table, bool need_logits = true) {
  for (int64_t i = cached; i < cached + count; ++i) {
    b.token_ids.push_back(ids[size_t(i)]);
    b.positions.push_back(int32_t(i));
  }
  b.seqs.push_back({cached, count, table, need_logits});
}

struct Seq {
  std::vector<int32_t> ids;  // prompt + one decode token
  std::vector<int32_t> table;
};

// Logits after the prompt and after the decode token, the sequence alone.
std::pair<std::vector<float>, std::vector<float>> alone(CausalLM& m, const Seq& s) {
  m.allocate_kv_cache(16, kBlock, KvCacheDtype::BF16);
  const int64_t n = int64_t(s.ids.size()) - 1;
  std::vector<int32_t> table = {3, 1, 2, 0};
  ForwardBatch p, d;
  add(p, s.ids, 0, n, table);
  add(d, s.ids, n, 1, table);
  std::vector<float> a = row(m.forward(p), 0);
  return {a, row(m.forward(d), 0)};
}

class PagedBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(PagedBatch, MixedPrefillAndDecodeStepsEqualSequencesAlone) {
  auto model = test::load(test::synth_checkpoint(GetParam(), 1));
  Seq a{{5, 9, 14, 200, 31, 7, 77, 8, 3, 17}, {0, 5, 9}};      // prompt 9
  Seq b{{11, 12, 13, 14, 15, 16}, {7, 2}};                       // prompt 5, prefilled in chunks 3 + 2
  Seq c{{600, 601, 2, 9, 40, 41, 42}, {4, 8}};                   // prompt 6
  auto ra = alone(*model, a), rb = alone(*model, b), rc = alone(*model, c);

  model->allocate_kv_cache(16, kBlock, KvCacheDtype::BF16);
  ForwardBatch s1, s2, s3;
  add(s1, a.ids, 0, 9, a.table);
  add(s1, b.ids, 0, 3, b.table, false);
  Tensor l1 = model->forward(s1);
  ASSERT_EQ(l1.dim(0), 1);
  add(s2, a.ids, 9, 1, a.table);   // decode
  add(s2, b.ids, 3, 2, b.table);   // last prefill chunk
  add(s2, c.ids, 0, 6, c.table);   // whole prefill
  Tensor l2 = model->forward(s2);
  add(s3, c.ids, 6, 1, c.table);
  add(s3, b.ids, 5, 1, b.table);
  Tensor l3 = model->forward(s3);

  // Every row is computed per token / per sequence, so equality is exact up
  // to nothing; 1e-5 leaves room only for a future reordered reduction.
  EXPECT_LE(test::max_abs_diff(row(l1, 0), ra.first), 1e-5) << "a prefill";
  EXPECT_LE(test::max_abs_diff(row(l2, 0), ra.second), 1e-5) << "a decode in a mixed step";
  EXPECT_LE(test::max_abs_diff(row(l2, 1), rb.first), 1e-5) << "b chunked prefill vs whole";
  EXPECT_LE(test::max_abs_diff(row(l2, 2), rc.first), 1e-5) << "c prefill in a mixed step";
  EXPECT_LE(test::max_abs_diff(row(l3, 0), rc.second), 1e-5) << "c decode";
  EXPECT_LE(test::max_abs_diff(row(l3, 1), rb.second), 1e-5) << "b decode after chunked prefill";
}

TEST_P(PagedBatch, ChunkedPrefillEqualsWholePrefillAcrossChunkSizes) {
  auto model = test::load(test::synth_checkpoint(GetParam(), 1));
  std::vector<int32_t> prompt = {1, 50, 99, 3, 4, 700, 12, 13, 14, 15, 16};
  GreedyOptions o;
  o.max_new_tokens = 4;
  o.block_size = kBlock;
  GreedyResult whole = greedy_generate(*model, prompt, o);
  double scale = 0;
  for (float v : whole.prompt_logits) scale = std::max(scale, double(std::fabs(v)));
  for (int64_t chunk : {1, 3, 4, 5}) {
    o.prefill_chunk = chunk;
    GreedyResult r = greedy_generate(*model, prompt, o);
    // Chunks of one token are decode steps: MLA takes its absorbed form there,
    // the same math in another association order (F32 rounding only).
    const double tol = chunk == 1 ? 5e-4 * scale : 1e-5;
    EXPECT_LE(test::max_abs_diff(r.prompt_logits, whole.prompt_logits), tol) << "chunk " << chunk;
    EXPECT_EQ(r.tokens, whole.tokens) << "chunk " << chunk;
  }
}

// Bounds relative to the largest logit: BF16 KV rounds K/V to 8 significant
// bits (relative error <= 2^-9 per element), FP8 E4M3 with a per-token scale
// to 4 bits (<= 2^-4); the errors pass through every layer, so the bounds are
// 5x (BF16) and ~1.6x (FP8) the per-element rounding bound. Measured on these
// checkpoints (2026-11-30): bf16 1.5e-3..2.7e-3, fp8 2.2e-2..4.6e-2.
TEST_P(PagedBatch, Fp8AndBf16KvStayCloseToF32Kv) {
  auto model = test::load(test::synth_checkpoint(GetParam(), 1));
  std::vector<int32_t> prompt = {1, 50, 99, 3, 4, 700, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  GreedyOptions o;
  o.max_new_tokens = 3;
  o.block_size = kBlock;
  o.kv_dtype = KvCacheDtype::F32;
  GreedyResult f32 = greedy_generate(*model, prompt, o);
  o.kv_dtype = KvCacheDtype::BF16;
  GreedyResult bf16 = greedy_generate(*model, prompt, o);
  o.kv_dtype = KvCacheDtype::FP8;
  GreedyResult fp8 = greedy_generate(*model, prompt, o);
  double scale = 0;
  for (float v : f32.prompt_logits) scale = std::max(scale, double(std::fabs(v)));
  const double bf16_diff = test::max_abs_diff(bf16.prompt_logits, f32.prompt_logits) / scale;
  const double fp8_diff = test::max_abs_diff(fp8.prompt_logits, f32.prompt_logits) / scale;
  std::cout << "[ kv       ] " << GetParam() << ": max |logit diff| / max |logit|: bf16 " << bf16_diff << ", fp8 "
            << fp8_diff << "\n";
  EXPECT_GT(fp8_diff, 0.0) << "FP8 storage must actually quantize";
  EXPECT_LE(bf16_diff, 1e-2);
  EXPECT_LE(fp8_diff, 0.1);
  EXPECT_LE(bf16_diff, fp8_diff);
}

TEST_P(PagedBatch, KvBytesPerTokenFollowsTheLayout) {
  auto model = test::load(test::synth_checkpoint(GetParam(), 1));
  const ModelConfig& c = model->config();
  int64_t bf16 = model->kv_bytes_per_token(KvCacheDtype::BF16), fp8 = model->kv_bytes_per_token(KvCacheDtype::FP8);
  if (c.arch == Arch::DeepseekV3) {
    EXPECT_EQ(bf16, c.num_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * 2);  // the 576-wide latent
    EXPECT_EQ(fp8, c.num_layers * ((c.kv_lora_rank + c.qk_rope_head_dim) + 4));
  } else {
    const int64_t d = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_heads;
    EXPECT_EQ(bf16, c.num_layers * 2 * c.num_kv_heads * d * 2);
    EXPECT_EQ(fp8, c.num_layers * (2 * c.num_kv_heads * d + 8));
  }
}

TEST(PagedBatchErrors, BadBatchesAreRejectedWithAMessage) {
  auto model = test::load(test::synth_checkpoint("llama", 1));
  model->allocate_kv_cache(2, kBlock, KvCacheDtype::BF16);
  ForwardBatch b;
  add(b, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 9, {0, 1});  // 9 tokens, 2 blocks of 4
  EXPECT_THROW(model->forward(b), InvalidArgument);
  ForwardBatch v;
  add(v, {1, 5000}, 0, 2, {0});  // id outside the 1024-token vocabulary
  EXPECT_THROW(model->forward(v), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Synth, PagedBatch, ::testing::Values("kimi-k25-mxfp4", "llama"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace mx
