#include "bench/random_dataset.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_tokenizer.h"

namespace mx::bench {

using testing::LetterTokenizer;
using testing::NumberTokenizer;

// The draws must come in the Python tool's order from one generator:
// integers(int(100*0.5), 101, 4), integers(int(10*0.5), 11, 4), integers(0, 1000, 4).
// (integers() itself is checked against numpy in numpy_random_test.cc and the
// whole dataset against a numpy reimplementation in test_bench_dataset.py.)
TEST(RandomDataset, DrawsLengthsAndOffsetsLikeNumpyAndBuildsTheIdSequence) {
  NumberTokenizer tok(1000);
  Pcg64 rng(0);
  RandomDatasetOptions o;
  o.input_len = 100;
  o.output_len = 10;
  o.range_ratio = 0.5;
  o.num_prompts = 4;
  const auto reqs = sample_random_requests(tok, o, rng);
  Pcg64 expect_rng(0);
  const auto in = integers(expect_rng, 50, 101, 4);
  const auto out = integers(expect_rng, 5, 11, 4);
  const auto off = integers(expect_rng, 0, 1000, 4);
  ASSERT_EQ(reqs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reqs[i].prompt_len, in[i]);
    EXPECT_EQ(reqs[i].target_prompt_len, in[i]);
    EXPECT_EQ(reqs[i].output_len, out[i]);
    const auto ids = tok.encode(reqs[i].prompt, true);
    ASSERT_EQ(int64_t(ids.size()), in[i]);
    for (int64_t k = 0; k < in[i]; ++k) EXPECT_EQ(ids[k], (off[i] + int64_t(i) + k) % 1000);
  }
}

TEST(RandomDataset, RatioOneGivesExactLengthsAndPrefixIsShared) {
  NumberTokenizer tok(500);
  Pcg64 rng(7);
  RandomDatasetOptions o;
  o.input_len = 30;
  o.output_len = 8;
  o.prefix_len = 5;
  o.num_prompts = 3;
  const auto reqs = sample_random_requests(tok, o, rng);
  const auto first = tok.encode(reqs[0].prompt, true);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.prompt_len, 35);
    EXPECT_EQ(r.output_len, 8);
    const auto ids = tok.encode(r.prompt, true);
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 5, first.begin()));
  }
  Pcg64 expect_rng(7);
  const auto prefix = integers(expect_rng, 0, 500, 5);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(first[k], prefix[k]);
}

TEST(RandomDataset, RoundTripRepairsLengthsThatDecodingChanged) {
  LetterTokenizer tok;
  Pcg64 rng(3);
  RandomDatasetOptions o;
  o.input_len = 40;
  o.output_len = 4;
  o.num_prompts = 20;
  const auto reqs = sample_random_requests(tok, o, rng);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.prompt_len, int64_t(tok.encode(r.prompt, true).size()));
    EXPECT_EQ(r.prompt_len, 40) << r.prompt;
  }
}

TEST(RandomDataset, RejectsBadOptions) {
  NumberTokenizer tok(10);
  Pcg64 rng(0);
  RandomDatasetOptions o;
  o.range_ratio = 1.5;
  EXPECT_THROW(sample_random_requests(tok, o, rng), InvalidArgument);
  o.range_ratio = 1.0;
  o.input_len = 0;
  EXPECT_THROW(sample_random_requests(tok, o, rng), InvalidArgument);
}

}  // namespace mx::bench
