#include "engine/batch_sampler.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/error.h"

namespace mx {
namespace {

constexpr int32_t kVocab = 64;

Tensor random_logits(int64_t rows, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(DType::F32, {rows, vocab});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// Sequences with every sampler feature in play, one per row.
std::vector<Sequence> make_sequences() {
  std::vector<Sequence> seqs(6);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = seqs[i];
    s.id = int64_t(i);
    s.tokens = {3, 5, 7, 5, 9, 3, 3, 11};
    s.num_prompt_tokens = 4;
    s.seed = 1000 + i;
    s.rng.seed(s.seed);
  }
  seqs[0].params.temperature = 0;                      // greedy
  seqs[1].params.top_k = 5;                             // sampled
  seqs[1].params.logprobs = 3;
  seqs[2].params.top_p = 0.7f;
  seqs[2].params.min_p = 0.05f;
  seqs[2].params.repetition_penalty = 1.3f;
  seqs[3].params.temperature = 0;
  seqs[3].params.presence_penalty = 0.5f;
  seqs[3].params.frequency_penalty = 0.25f;
  seqs[3].params.logit_bias = {{1, 5.0f}, {2, -100.0f}};
  seqs[3].params.logprobs = 0;
  seqs[4].params.temperature = 0.7f;
  seqs[5].params.temperature = 0;
  seqs[5].params.logprobs = 5;
  return seqs;
}

// The engine's loop before the BatchSampler existed, kept here as the reference.
SampledToken old_engine_path(std::span<const float> row, Sequence& seq, const std::vector<int32_t>& banned_ids) {
  std::vector<float> banned;
  if (!banned_ids.empty()) {
    banned.assign(row.begin(), row.end());
    for (int32_t t = 0; t < kVocab; ++t)
      if (std::find(banned_ids.begin(), banned_ids.end(), t) != banned_ids.end())
        banned[size_t(t)] = -std::numeric_limits<float>::infinity();
    row = banned;
  }
  return sample_token(row, seq.params, seq.tokens, seq.num_prompt_tokens, seq.rng, kVocab);
}

void expect_same(const SampledToken& a, const SampledToken& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.logprob.token, b.logprob.token);
  EXPECT_EQ(a.logprob.logprob, b.logprob.logprob);  // bit-identical, not just close
  EXPECT_EQ(a.logprob.top, b.logprob.top);
}

TEST(BatchSampler, CpuMatchesThePerSequenceLoopBitForBit) {
  auto batch_seqs = make_sequences();
  auto ref_seqs = make_sequences();
  auto sampler = make_cpu_batch_sampler();
  EXPECT_FALSE(sampler->wants_device_logits());
  for (int step = 0; step < 20; ++step) {
    const Tensor logits = random_logits(int64_t(batch_seqs.size()), kVocab, uint64_t(step));
    std::vector<SamplingRow> rows;
    std::vector<std::vector<int32_t>> bans(batch_seqs.size());
    bans[1] = {0, 4};  // stop tokens not yet allowed (min_tokens)
    bans[3] = {1};     // banned beats a +5 logit bias
    for (size_t i = 0; i < batch_seqs.size(); ++i) rows.push_back({&batch_seqs[i], bans[i]});
    const auto got = sampler->sample(logits, rows, kVocab);
    ASSERT_EQ(got.size(), rows.size());
    for (size_t i = 0; i < ref_seqs.size(); ++i) {
      std::span<const float> row(logits.data<float>() + int64_t(i) * kVocab, kVocab);
      const SampledToken want = old_engine_path(row, ref_seqs[i], bans[i]);
      expect_same(got[i], want);
      batch_seqs[i].tokens.push_back(got[i].token);
      ref_seqs[i].tokens.push_back(want.token);
    }
    EXPECT_NE(got[1].token, 0);  // banned tokens are never drawn
    EXPECT_NE(got[1].token, 4);
    EXPECT_NE(got[3].token, 1);
    EXPECT_NE(got[3].token, 2);
  }
}

TEST(BatchSampler, RowsBeyondVocabLimitAreNeverSampled) {
  Sequence seq;
  seq.params.temperature = 0;
  seq.tokens = {1};
  seq.num_prompt_tokens = 1;
  Tensor logits = Tensor::empty(DType::F32, {1, 8});
  for (int i = 0; i < 8; ++i) logits.data<float>()[i] = float(i);  // the padded ids are the largest
  std::vector<SamplingRow> rows{{&seq, {}}};
  EXPECT_EQ(make_cpu_batch_sampler()->sample(logits, rows, 5)[0].token, 4);
}

TEST(BatchSampler, RefusesTooFewLogitRows) {
  Sequence a, b;
  a.tokens = b.tokens = {1};
  a.num_prompt_tokens = b.num_prompt_tokens = 1;
  std::vector<SamplingRow> rows{{&a, {}}, {&b, {}}};
  EXPECT_THROW(make_cpu_batch_sampler()->sample(random_logits(1, 8, 0), rows, 8), Error);
}

TEST(BatchSampler, RegistryHasCpuAndNamesWhatIsMissing) {
  EXPECT_EQ(make_batch_sampler("cpu", 0)->name(), "cpu");
  try {
    make_batch_sampler("tpu", 0);
    FAIL() << "an unknown sampler device must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("available: cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mx
