// Tensor / expert parallelism on the CPU backend with the in-process
// communicator: a TP=2, EP=2 (experts split, attention TP=2) and TP=4 model
// give the logits of the unsharded model within 2e-5 of the largest logit
// (the sums of the row-parallel blocks are taken in another order, nothing
// else changes), and the same greedy tokens, on synthetic Llama (GQA) and
// Kimi-K2.5 MXFP4 (MLA + MoE) checkpoints and on dummy weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/causal_lm.h"
#include "model/greedy.h"
#include "quant/synth_checkpoint.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

fs::path synth(const std::string& preset) {
  fs::path dir = fs::temp_directory_path() / ("mx_tp_" + std::to_string(::getpid()) + "_" + preset);
  if (!fs::exists(dir / "config.json")) write_synthetic_checkpoint(dir, preset, 11);
  return dir;
}

struct Run {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // prompt logits, then each decode step's
};

Run generate(const fs::path& dir, LoadOptions o, ActivationMode mode = ActivationMode::W4A16) {
  o.activation_mode = mode;
  o.num_threads = 2;
  auto model = load_causal_lm(dir, o);
  GreedyOptions g;
  g.max_new_tokens = 6;
  g.block_size = 4;  // several blocks per sequence
  g.prefill_chunk = 5;
  g.kv_dtype = KvCacheDtype::F32;
  GreedyResult r = greedy_generate(*model, {3, 17, 250, 9, 31, 77, 5, 130, 64, 8, 12}, g);
  Run run{r.tokens, {r.prompt_logits}};
  for (auto& l : r.step_logits) run.logits.push_back(l);
  return run;
}

LoadOptions parallel(int tp, bool ep) {
  LoadOptions o;
  o.tensor_parallel_size = tp;
  o.expert_parallel = ep;
  return o;
}

// max |a - b| / max |a| over every step's logits.
double relative_diff(const Run& a, const Run& b) {
  double diff = 0, scale = 0;
  for (size_t s = 0; s < std::min(a.logits.size(), b.logits.size()); ++s) {
    EXPECT_EQ(a.logits[s].size(), b.logits[s].size());
    for (size_t i = 0; i < a.logits[s].size(); ++i) {
      diff = std::max(diff, double(std::fabs(a.logits[s][i] - b.logits[s][i])));
      scale = std::max(scale, double(std::fabs(a.logits[s][i])));
    }
  }
  return diff / scale;
}

constexpr double kTolerance = 2e-5;

void expect_parity(const fs::path& dir, const LoadOptions& sharded, ActivationMode mode = ActivationMode::W4A16,
                   const LoadOptions& base = {}) {
  const Run ref = generate(dir, base, mode);
  const Run got = generate(dir, sharded, mode);
  ASSERT_EQ(ref.logits.size(), got.logits.size());
  const double d = relative_diff(ref, got);
  EXPECT_LT(d, kTolerance) << "tp " << sharded.tensor_parallel_size << " ep " << sharded.expert_parallel;
  EXPECT_GT(d, 0.0) << "bitwise equal: was the model sharded at all?";
  EXPECT_EQ(ref.tokens, got.tokens);
  ::testing::Test::RecordProperty("relative_max_logit_diff", std::to_string(d));
  std::printf("relative max logit diff %.3g (tp %d, ep %d)\n", d, sharded.tensor_parallel_size,
              int(sharded.expert_parallel));
}

TEST(ParallelParity, LlamaTp2) { expect_parity(synth("llama"), parallel(2, false)); }
// 8 query heads, 2 KV heads: over 4 ranks each rank keeps the KV head its queries use.
TEST(ParallelParity, LlamaTp4ReplicatesKvHeads) { expect_parity(synth("llama"), parallel(4, false)); }
TEST(ParallelParity, KimiMxfp4Tp2) { expect_parity(synth("kimi-k25-mxfp4"), parallel(2, false)); }
TEST(ParallelParity, KimiMxfp4Ep2) { expect_parity(synth("kimi-k25-mxfp4"), parallel(2, true)); }
TEST(ParallelParity, KimiMxfp4Tp2W4A4) {
  // MXFP4 input quantization is per 32 along K: shards cut on those groups, so W4A4 shards alike.
  expect_parity(synth("kimi-k25-mxfp4"), parallel(2, false), ActivationMode::W4A4);
}
TEST(ParallelParity, DeepseekFp8Ep2) { expect_parity(synth("deepseek-v3-fp8"), parallel(2, true)); }

TEST(ParallelParity, KimiDummyWeightsTp2AndEp2) {
  LoadOptions dummy;
  dummy.load_format = "dummy";
  dummy.dummy_seed = 5;
  LoadOptions tp = parallel(2, false), ep = parallel(2, true);
  tp.load_format = ep.load_format = "dummy";
  tp.dummy_seed = ep.dummy_seed = 5;
  expect_parity(synth("kimi-k25-mxfp4"), tp, ActivationMode::W4A16, dummy);
  expect_parity(synth("kimi-k25-mxfp4"), ep, ActivationMode::W4A16, dummy);
}

TEST(ParallelParity, UnevenSplitsAreRefusedWithTheReason) {
  try {
    generate(synth("llama"), parallel(3, false));  // 8 heads over 3 ranks
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("does not split over 3 ranks"), std::string::npos) << e.what();
  }
}

TEST(ParallelParity, DescribeNamesTheRanks) {
  auto model = load_causal_lm(synth("kimi-k25-mxfp4"), parallel(2, true));
  EXPECT_NE(model->describe().find("2 ranks (tensor + expert parallel)"), std::string::npos) << model->describe();
}

}  // namespace
}  // namespace mx

namespace mx {
namespace {

// A rank that fails in the middle of serving (here: rank 1 throws before its
// forward step while rank 0 is already waiting in the first all_reduce) stops
// the group with that rank's error instead of a hang; later steps fail at
// once, and the failure callback (serve: shut down) runs once.
TEST(ParallelFailure, AFailingRankStopsTheModelWithItsError) {
  LoadOptions o = parallel(2, false);
  int failures_reported = 0;
  std::string reported;
  o.on_parallel_failure = [&](const std::string& why) {
    ++failures_reported;
    reported = why;
  };
  o.parallel_step_hook = [](int rank, int64_t step) {
    if (rank == 1 && step == 2) fail("CUDA error: an illegal memory access was encountered");
  };
  auto model = load_causal_lm(synth("kimi-k25-mxfp4"), o);
  GreedyOptions g;
  g.max_new_tokens = 5;
  try {
    greedy_generate(*model, {3, 17, 250}, g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 1: CUDA error: an illegal memory access was encountered");
  }
  EXPECT_EQ(failures_reported, 1);
  EXPECT_NE(reported.find("rank 1"), std::string::npos);
  try {
    greedy_generate(*model, {3, 17}, g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stopped earlier"), std::string::npos) << e.what();
  }
  EXPECT_EQ(failures_reported, 1);  // reported once (serve shuts down then)
}

}  // namespace
}  // namespace mx
