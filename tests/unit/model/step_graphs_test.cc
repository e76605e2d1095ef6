// Step graphs on the model side (model/step_graphs.h, DecoderModel's
// recorded decode steps): which steps are recorded and how they are padded,
// and, through a CPU backend that claims graph support (it runs a "capture"
// eagerly), that padded static steps give the real sequences exactly the
// logits of plain eager steps, that their prepares are the same sequence each
// step (what a replay relies on), and that a failing capture falls back.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "core/error.h"
#include "dist/communicator_factory.h"
#include "dist/local_group.h"
#include "model/step_graphs.h"
#include "model_test_util.h"
#include "ops/backend_registry.h"
#include "ops/cpu_ops.h"

namespace mx {
namespace {

ForwardBatch decode_batch(const std::vector<int64_t>& cached, int64_t block = 4) {
  ForwardBatch b;
  for (size_t i = 0; i < cached.size(); ++i) {
    b.token_ids.push_back(int32_t(10 + i));
    b.positions.push_back(int32_t(cached[i]));
    std::vector<int32_t> table;
    for (int64_t t = 0; t <= cached[i]; t += block) table.push_back(int32_t(table.size() + 8 * i));
    b.seqs.push_back({cached[i], 1, table, true});
  }
  return b;
}

TEST(StepGraphs, BatchSizesFollowMaxNumSeqs) {
  EXPECT_EQ(decode_graph_batch_sizes(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(decode_graph_batch_sizes(3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(decode_graph_batch_sizes(20), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
  EXPECT_EQ(decode_graph_batch_sizes(32), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32}));
}

TEST(StepGraphs, PlansOnlyDecodeStepsTheConfigCovers) {
  StepGraphConfig c;
  c.batch_sizes = decode_graph_batch_sizes(16);
  c.max_blocks_per_seq = 8;
  auto plan = plan_decode_graph(decode_batch({3, 9, 17}), c, 4);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->batch, 3);
  EXPECT_EQ(plan->padded_batch, 4);
  EXPECT_EQ(plan->table_width, 8);  // 18 tokens need 5 blocks of 4 -> 8
  EXPECT_NE(plan->key, plan_decode_graph(decode_batch({3, 9}), c, 4)->key) << "keyed by the padded batch";
  EXPECT_NE(plan->key, plan_decode_graph(decode_batch({3, 9, 2}), c, 4)->key) << "keyed by the table width";
  EXPECT_EQ(plan_decode_graph(decode_batch({3, 2, 1}), c, 4)->table_width, 1);

  ForwardBatch prefill = decode_batch({3});
  prefill.seqs[0].num_new_tokens = 2;
  prefill.token_ids.push_back(1);
  prefill.positions.push_back(4);
  EXPECT_FALSE(plan_decode_graph(prefill, c, 4)) << "prefill tokens";
  ForwardBatch no_logits = decode_batch({3, 4});
  no_logits.seqs[1].need_logits = false;
  EXPECT_FALSE(plan_decode_graph(no_logits, c, 4)) << "a sequence without logits";
  EXPECT_FALSE(plan_decode_graph(decode_batch(std::vector<int64_t>(17, 1)), c, 4)) << "more than the largest size";
  EXPECT_FALSE(plan_decode_graph(decode_batch({40}), c, 4)) << "longer than max_blocks_per_seq";
  EXPECT_FALSE(plan_decode_graph(decode_batch({3}), StepGraphConfig{}, 4)) << "graphs off";
}

TEST(StepGraphs, PaddingSequencesDecodeIntoTheScratchBlock) {
  StepGraphConfig c;
  c.batch_sizes = {1, 2, 4, 8};
  const ForwardBatch b = decode_batch({3, 9, 17});
  const ForwardBatch p = pad_decode_batch(b, *plan_decode_graph(b, c, 4), 99);
  ASSERT_EQ(p.seqs.size(), 4u);
  ASSERT_EQ(p.token_ids.size(), 4u);
  ASSERT_EQ(p.positions.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(p.seqs[i].block_table, b.seqs[i].block_table);
  EXPECT_EQ(p.seqs[3].block_table, std::vector<int32_t>{99});
  EXPECT_EQ(p.seqs[3].num_cached_tokens, 0);
  EXPECT_EQ(p.seqs[3].num_new_tokens, 1);
  EXPECT_EQ(p.positions[3], 0);
}

// The CPU backend claiming step graphs: a capture runs the ops eagerly (there
// is nothing to record), replay never succeeds, so every recorded step after
// a shape's first runs through begin_capture / end_capture. It logs each
// static step's prepares and can fail the next capture.
struct FakeGraphLog {
  int static_steps = 0, captures = 0, aborts = 0;
  std::map<uint64_t, int> capture_keys;
  std::vector<std::vector<size_t>> static_prepares;  // per static step: sizes of its prepares, in order
  bool fail_next_capture = false;
  bool replay = false;
};
FakeGraphLog g_log;
std::mutex g_log_mu;  // the ranks of a -tp model log from their own threads

class FakeGraphOps : public CpuOps {
 public:
  FakeGraphOps() : CpuOps(ActivationMode::W4A16) {}
  bool supports_step_graphs() const override { return true; }
  void begin_static_step(uint64_t key) override {
    std::lock_guard lock(g_log_mu);
    key_ = key;
    ++g_log.static_steps;
    g_log.static_prepares.emplace_back();
    static_ = true;
  }
  void begin_step() override { static_ = false; }
  void prepare(const std::vector<int32_t>& v) override { note(v.size()); }
  void prepare(const std::vector<int64_t>& v) override { note(v.size()); }
  void prepare(const AttentionMeta& m) override { note(m.seqs.size() * 1000 + size_t(m.table_width)); }
  bool begin_capture(DType, Shape) override {
    std::lock_guard lock(g_log_mu);
    ++g_log.captures;
    ++g_log.capture_keys[key_];
    capturing_ = true;
    return true;
  }
  Tensor end_capture(Tensor out) override {
    capturing_ = false;
    recorded_[key_] = out;
    return out;
  }
  // With g_log.replay on, a captured shape "replays" its recorded output
  // without running any op, as a real recording would (stale logits: only
  // for tests that check what happens before the replay).
  bool replay_step(Tensor& out) override {
    std::lock_guard lock(g_log_mu);
    auto it = recorded_.find(key_);
    if (!g_log.replay || !static_ || it == recorded_.end()) return false;
    out = it->second;
    return true;
  }
  void abort_capture() override {
    std::lock_guard lock(g_log_mu);
    ++g_log.aborts;
    capturing_ = false;
  }
  Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) override {
    {
      std::lock_guard lock(g_log_mu);
      if (capturing_ && g_log.fail_next_capture) {
        g_log.fail_next_capture = false;
        fail("fake: this op cannot be recorded");
      }
    }
    return CpuOps::embedding(table, ids);
  }

 private:
  void note(size_t n) {
    std::lock_guard lock(g_log_mu);
    if (static_) g_log.static_prepares.back().push_back(n);
  }
  bool static_ = false, capturing_ = false;
  uint64_t key_ = 0;
  std::map<uint64_t, Tensor> recorded_;
};

std::unique_ptr<CausalLM> load_on(const std::string& device, const std::string& preset, int tp = 1) {
  static const bool registered = [] {
    register_ops_backend("fake-step-graphs", [](const BackendOptions&) -> std::unique_ptr<Ops> {
      return std::make_unique<FakeGraphOps>();
    });
    // Its ranks meet in the CPU's in-process collectives.
    register_communicator_factory("fake-step-graphs",
                                  [](int world, int) { return LocalGroup::make(world); });
    return true;
  }();
  (void)registered;
  LoadOptions o;
  o.device = device;
  o.tensor_parallel_size = tp;
  return load_causal_lm(test::synth_checkpoint(preset, 1), o);
}

std::vector<float> row(const Tensor& logits, int64_t r) {
  const int64_t v = logits.dim(1);
  return std::vector<float>(logits.data<float>() + r * v, logits.data<float>() + (r + 1) * v);
}

// The fake-backend model with 16 KV blocks of 4 tokens, graphs for 1 and 2 sequences.
std::unique_ptr<CausalLM> small_graphed_model(const std::string& preset) {
  auto graphed = load_on("fake-step-graphs", preset);
  graphed->allocate_kv_cache(16, 4, KvCacheDtype::BF16);
  StepGraphConfig c;
  c.batch_sizes = {1, 2};
  c.max_blocks_per_seq = 4;
  graphed->enable_step_graphs(c);
  return graphed;
}

class StepGraphModel : public ::testing::TestWithParam<std::string> {};

TEST_P(StepGraphModel, RecordedDecodeStepsMatchEagerSteps) {
  constexpr int64_t kBlock = 4, kBlocks = 32;
  auto eager = load_on("cpu", GetParam());
  auto graphed = load_on("fake-step-graphs", GetParam());
  eager->allocate_kv_cache(kBlocks, kBlock, KvCacheDtype::BF16);
  graphed->allocate_kv_cache(kBlocks, kBlock, KvCacheDtype::BF16);
  StepGraphConfig c;
  c.batch_sizes = decode_graph_batch_sizes(8);
  c.max_blocks_per_seq = 8;
  graphed->enable_step_graphs(c);
  g_log = FakeGraphLog{};

  // Three sequences: prefill, then decode steps (padded to 4 sequences).
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 14, 200, 31}, {11, 12, 13}, {600, 601, 2, 9, 40, 41}};
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  ForwardBatch prefill;
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (size_t i = 0; i < prompts[s].size(); ++i) {
      prefill.token_ids.push_back(prompts[s][i]);
      prefill.positions.push_back(int32_t(i));
    }
    prefill.seqs.push_back({0, int64_t(prompts[s].size()), tables[s], true});
  }
  Tensor a = eager->forward(prefill), b = graphed->forward(prefill);
  EXPECT_EQ(g_log.static_steps, 0) << "a prefill step is never recorded";
  EXPECT_LE(test::max_abs_diff(row(a, 2), row(b, 2)), 1e-6);

  for (int step = 0; step < 4; ++step) {
    ForwardBatch d;
    for (size_t s = 0; s < prompts.size(); ++s) {
      d.token_ids.push_back(int32_t(100 + 7 * step + int32_t(s)));
      const int64_t cached = int64_t(prompts[s].size()) + step;
      d.positions.push_back(int32_t(cached));
      d.seqs.push_back({cached, 1, tables[s], true});
    }
    if (step == 2) g_log.fail_next_capture = true;
    Tensor le = eager->forward(d), lg = graphed->forward(d);
    ASSERT_EQ(lg.dim(0), 3) << "padding rows are dropped";
    for (int64_t s = 0; s < 3; ++s)
      EXPECT_LE(test::max_abs_diff(row(le, s), row(lg, s)), 1e-6) << "step " << step << " sequence " << s;
  }
  EXPECT_EQ(g_log.static_steps, 4);
  // Contexts 6..10 need 2 blocks of 4 in steps 0-1 (width 2) and 3 in steps
  // 2-3 (width 4): each shape's first step runs eagerly, its second is
  // captured; step 3's capture fails (the flag set at step 2 waits for a
  // capture) and falls back to an eager run.
  EXPECT_EQ(g_log.captures, 2);
  EXPECT_EQ(g_log.aborts, 1);
  // A replay relies on the same prepares in the same order for one shape.
  ASSERT_EQ(g_log.static_prepares.size(), 4u);
  EXPECT_EQ(g_log.static_prepares[0], g_log.static_prepares[1]);
  EXPECT_EQ(g_log.static_prepares[2], g_log.static_prepares[3]);
  EXPECT_NE(g_log.static_prepares[1], g_log.static_prepares[2]);
}

TEST_P(StepGraphModel, EveryStepOfARecordedShapeIsCaptured) {
  auto graphed = small_graphed_model(GetParam());
  g_log = FakeGraphLog{};
  for (int step = 0; step < 3; ++step) {
    ForwardBatch d;
    d.token_ids = {7};
    d.positions = {int32_t(step)};
    d.seqs.push_back({step, 1, {3}, true});
    graphed->forward(d);
  }
  EXPECT_EQ(g_log.static_steps, 3);
  EXPECT_EQ(g_log.captures, 2) << "first step eager, then the shape is captured (the fake never replays)";
  EXPECT_EQ(g_log.aborts, 0);
}

TEST_P(StepGraphModel, RecordedStepsCheckTokenAndBlockIdsOnTheHost) {
  // A replayed step runs no op, so the model checks what the ops would: the
  // shape is recorded first, then the bad steps would replay it.
  auto graphed = small_graphed_model(GetParam());
  g_log = FakeGraphLog{};
  g_log.replay = true;
  for (int step = 0; step < 2; ++step) {
    ForwardBatch warm;
    warm.token_ids = {7};
    warm.positions = {int32_t(step)};
    warm.seqs.push_back({step, 1, {3}, true});
    graphed->forward(warm);
  }
  ASSERT_EQ(g_log.captures, 1);
  ForwardBatch bad_block;
  bad_block.token_ids = {7};
  bad_block.positions = {0};
  bad_block.seqs.push_back({0, 1, {17}, true});  // blocks 0..15 and the scratch block 16
  EXPECT_THROW(graphed->forward(bad_block), InvalidArgument);
  ForwardBatch bad_token = bad_block;
  bad_token.seqs[0].block_table = {3};
  bad_token.token_ids = {int32_t(graphed->config().vocab_size)};
  EXPECT_THROW(graphed->forward(bad_token), InvalidArgument);
  ForwardBatch fine = bad_token;
  fine.token_ids = {7};
  EXPECT_NO_THROW(graphed->forward(fine));
}

TEST_P(StepGraphModel, TensorParallelRanksAllRecordTheSameSteps) {
  // enable_step_graphs reaches every rank of a -tp group; ranks other than
  // 0 record an empty result; the logits equal the unsharded eager model's.
  auto eager = load_on("cpu", GetParam());
  auto graphed = load_on("fake-step-graphs", GetParam(), 2);
  eager->allocate_kv_cache(16, 4, KvCacheDtype::BF16);
  graphed->allocate_kv_cache(16, 4, KvCacheDtype::BF16);
  StepGraphConfig c;
  c.batch_sizes = {1, 2, 4};
  c.max_blocks_per_seq = 4;
  graphed->enable_step_graphs(c);
  g_log = FakeGraphLog{};
  for (int step = 0; step < 3; ++step) {
    ForwardBatch d;
    for (int s = 0; s < 3; ++s) {
      d.token_ids.push_back(int32_t(20 + 5 * step + s));
      d.positions.push_back(int32_t(step));
      d.seqs.push_back({step, 1, {int32_t(3 * s), int32_t(3 * s + 1)}, true});
    }
    Tensor le = eager->forward(d), lg = graphed->forward(d);
    ASSERT_EQ(lg.dim(0), 3);
    for (int64_t s = 0; s < 3; ++s)
      EXPECT_LE(test::max_abs_diff(row(le, s), row(lg, s)), 2e-5) << "step " << step << " sequence " << s;
  }
  EXPECT_EQ(g_log.static_steps, 6) << "3 static steps on each of 2 ranks";
  EXPECT_EQ(g_log.captures, 4) << "steps 1 and 2 captured on both ranks";
  EXPECT_EQ(g_log.aborts, 0);
}

INSTANTIATE_TEST_SUITE_P(Synth, StepGraphModel, ::testing::Values("llama", "kimi-k25-mxfp4"),
                         [](const auto& info) { return info.param == "llama" ? "llama" : "kimi"; });

}  // namespace
}  // namespace mx
