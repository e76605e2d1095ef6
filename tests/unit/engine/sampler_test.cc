#include "engine/sampler.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace mx {
namespace {

SampledToken draw(const std::vector<float>& logits, const SamplingParams& p, std::mt19937_64& rng,
                  const std::vector<int32_t>& tokens = {}, int64_t num_prompt = 0) {
  return sample_token(logits, p, tokens, num_prompt, rng, int32_t(logits.size()));
}

std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  std::mt19937_64 rng(1);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) ++h[draw(logits, p, rng).token];
  return h;
}

TEST(Sampler, GreedyTakesTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(0);
  EXPECT_EQ(draw({0.1f, 3.0f, 2.9f, -1.0f}, p, rng).token, 1);
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  SamplingParams p;  // temperature 1
  auto h = histogram({0.0f, std::log(3.0f)}, p, 20000);  // probabilities 1/4, 3/4
  EXPECT_NEAR(h[1] / 20000.0, 0.75, 0.02);
  p.temperature = 100.0f;  // nearly uniform
  h = histogram({0.0f, std::log(3.0f)}, p, 20000);
  EXPECT_NEAR(h[1] / 20000.0, 0.5, 0.02);
}

TEST(Sampler, TopKKeepsTheKBest) {
  SamplingParams p;
  p.top_k = 2;
  auto h = histogram({1.0f, 3.0f, 2.9f, 0.5f, 2.0f}, p, 3000);
  EXPECT_EQ(std::set<int32_t>({1, 2}), [&] { std::set<int32_t> s; for (auto& [t, c] : h) s.insert(t); return s; }());
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.top_p = 0.6f;  // probabilities .5 .3 .2: the nucleus is {0, 1}
  auto h = histogram({std::log(0.5f), std::log(0.3f), std::log(0.2f)}, p, 5000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_NEAR(h[0] / 5000.0, 0.5 / 0.8, 0.03);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.5f;  // keeps tokens with p >= .5 * max
  auto h = histogram({std::log(0.4f), std::log(0.35f), std::log(0.25f) - 0.0f, std::log(0.1f)}, p, 5000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h[2], 0);  // .25 >= .2
}

TEST(Sampler, PenaltiesLowerRepeatedTokens) {
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(0);
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  const std::vector<int32_t> tokens = {2, 0};  // prompt {2}, generated {0}
  EXPECT_EQ(draw(logits, p, rng, tokens, 1).token, 0);
  p.presence_penalty = 0.2f;
  EXPECT_EQ(draw(logits, p, rng, tokens, 1).token, 1);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.05f;
  EXPECT_EQ(draw(logits, p, rng, {2, 0, 0, 0}, 1).token, 1);  // 3 * .05 > .1
  EXPECT_EQ(draw(logits, p, rng, {2, 0}, 1).token, 0);        // 1 * .05 < .1
  p.frequency_penalty = 0;
  p.presence_penalty = 2.0f;  // penalties see only generated tokens: prompt token 0 is not penalized
  EXPECT_EQ(draw(logits, p, rng, {0, 2}, 1).token, 0);
  p.presence_penalty = 0;
  p.repetition_penalty = 1.2f;  // 2.0 / 1.2 < 1.9; the prompt counts here
  EXPECT_EQ(draw(logits, p, rng, {0, 2}, 1).token, 1);
}

TEST(Sampler, LogitBiasShiftsChoices) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias[2] = 5.0f;
  std::mt19937_64 rng(0);
  EXPECT_EQ(draw({2.0f, 1.9f, 0.0f}, p, rng).token, 2);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
  std::mt19937_64 a(42), b(42), c(43);
  std::vector<int32_t> sa, sb, sc;
  for (int i = 0; i < 50; ++i) {
    sa.push_back(draw(logits, p, a).token);
    sb.push_back(draw(logits, p, b).token);
    sc.push_back(draw(logits, p, c).token);
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Sampler, ReportsRawLogprobs) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  p.presence_penalty = 1.0f;  // moves the choice to token 1, but not the reported distribution
  std::mt19937_64 rng(0);
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.25f)};
  SampledToken s = draw(logits, p, rng, {0}, 0);
  EXPECT_EQ(s.token, 1);
  EXPECT_EQ(s.logprob.token, 1);
  EXPECT_NEAR(s.logprob.logprob, std::log(0.25f), 1e-5);
  ASSERT_EQ(s.logprob.top.size(), 2u);
  EXPECT_EQ(s.logprob.top[0].first, 0);
  EXPECT_EQ(s.logprob.top[1].first, 1);  // ties broken by id
  EXPECT_NEAR(s.logprob.top[1].second, std::log(0.25f), 1e-5);
}

TEST(Sampler, NeverSamplesBeyondTheVocabLimit) {
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(0);
  std::vector<float> logits = {0.0f, 1.0f, 9.0f};  // id 2 is padding
  EXPECT_EQ(sample_token(logits, p, {}, 0, rng, 2).token, 1);
}

TEST(SamplingParams, RejectsOutOfRangeValues) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(p.validate(100), InvalidArgument);
  };
  bad([](SamplingParams& p) { p.temperature = -1; });
  bad([](SamplingParams& p) { p.temperature = NAN; });
  bad([](SamplingParams& p) { p.top_p = 0; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = 2; });
  bad([](SamplingParams& p) { p.max_tokens = 0; });
  bad([](SamplingParams& p) { p.presence_penalty = 3; });
  bad([](SamplingParams& p) { p.repetition_penalty = 0; });
  bad([](SamplingParams& p) { p.logprobs = 21; });
  bad([](SamplingParams& p) { p.stop_token_ids = {100}; });
  bad([](SamplingParams& p) { p.logit_bias[5] = 200; });
  bad([](SamplingParams& p) { p.stop = {""}; });
  SamplingParams ok;
  EXPECT_NO_THROW(ok.validate(100));
}

}  // namespace
}  // namespace mx
