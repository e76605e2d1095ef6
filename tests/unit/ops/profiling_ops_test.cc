#include "ops/profiling_ops.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

AttentionMeta meta_of(std::vector<int64_t> new_tokens) {
  AttentionMeta m;
  m.block_size = 16;
  int64_t row = 0;
  for (int64_t n : new_tokens) {
    m.seqs.push_back({row, n, 7, {0}});
    row += n;
  }
  return m;
}

LinearWeight dense(const std::string& name, int64_t out, int64_t in) {
  LinearWeight w;
  w.name = name;
  w.out_features = out;
  w.in_features = in;
  w.weight = Tensor::from_f32(std::vector<float>(size_t(out * in), 0.5f), {out, in});
  return w;
}

TEST(ProfilingOps, SumsEachOpPerKindOfStepAndForwardsResults) {
  ProfilingOps ops(make_cpu_ops(ActivationMode::W4A16), "test");
  const Tensor x = Tensor::from_f32({1, 2, 3, 4}, {2, 2});
  const Tensor norm = Tensor::from_f32({1, 1}, {2});
  // A decode step: two sequences, one new token each; the same projection
  // of two layers; one all-reduce region.
  ops.begin_step();
  ops.prepare(meta_of({1, 1}));
  ops.prepare(meta_of({1}));  // a later meta of the same step (the decode subset) does not reclassify
  Tensor h = ops.rms_norm(x, norm, 1e-6f);
  ops.rms_norm(h, norm, 1e-6f);
  const Tensor y0 = ops.linear(h, dense("model.layers.0.self_attn.q_proj", 3, 2));
  ops.linear(h, dense("language_model.model.layers.11.self_attn.q_proj", 3, 2));
  ops.linear(h, dense("lm_head", 3, 2));
  ops.begin_region("all_reduce");
  ops.end_region();
  // The results are the backend's.
  auto cpu = make_cpu_ops(ActivationMode::W4A16);
  const Tensor expect = cpu->linear(cpu->rms_norm(x, norm, 1e-6f), dense("w", 3, 2));
  ASSERT_EQ(y0.numel(), expect.numel());
  for (int64_t i = 0; i < y0.numel(); ++i) EXPECT_FLOAT_EQ(y0.data<float>()[i], expect.data<float>()[i]);

  // A prefill step: one sequence of 5 new tokens.
  ops.begin_step();
  ops.prepare(meta_of({5}));
  ops.rms_norm(x, norm, 1e-6f);

  // A decode step of three sequences: a bucket of its own (3-4).
  ops.begin_step();
  ops.prepare(meta_of({1, 1, 1}));
  ops.rms_norm(x, norm, 1e-6f);

  const OpProfile& p = ops.profile();
  ASSERT_EQ(p.decode.size(), 2u);
  const StepProfile& d2 = p.decode.at(2);
  EXPECT_EQ(d2.steps, 1);
  EXPECT_EQ(d2.sequences, 2);
  EXPECT_EQ(d2.tokens, 2);
  EXPECT_EQ(d2.entries.at("rms_norm").calls, 2);
  EXPECT_EQ(d2.entries.at("linear self_attn.q_proj").calls, 2);  // layers 0 and 11 in one row
  EXPECT_EQ(d2.entries.at("linear lm_head").calls, 1);
  EXPECT_EQ(d2.entries.at("all_reduce").calls, 1);
  EXPECT_EQ(p.decode.at(4).steps, 1);
  EXPECT_EQ(p.decode.at(4).sequences, 3);
  EXPECT_EQ(p.prefill.steps, 1);
  EXPECT_EQ(p.prefill.tokens, 5);
  EXPECT_EQ(p.prefill.entries.at("rms_norm").calls, 1);
  EXPECT_EQ(p.prefill.entries.count("linear lm_head"), 0u);
  // Ops run one after another on this clock: their sum fits in the span.
  double in_ops = 0;
  for (const auto& [name, e] : d2.entries) {
    EXPECT_GE(e.ms, 0.0) << name;
    in_ops += e.ms;
  }
  EXPECT_LE(in_ops, d2.span_ms + 1e-9);

  const std::string report = ops.report();
  EXPECT_NE(report.find("op profile (test"), std::string::npos) << report;
  EXPECT_NE(report.find("decode (2 seqs) steps: 1, 2.0 sequences"), std::string::npos) << report;
  EXPECT_NE(report.find("decode (3-4 seqs) steps: 1, 3.0 sequences"), std::string::npos) << report;
  EXPECT_NE(report.find("prefill/mixed steps: 1, 1.0 sequences and 5.0 new tokens"), std::string::npos) << report;
  EXPECT_NE(report.find("linear self_attn.q_proj"), std::string::npos) << report;
}

TEST(ProfilingOps, AStepWithoutOpsIsNotCounted) {
  ProfilingOps ops(make_cpu_ops(ActivationMode::W4A16), "idle");
  ops.begin_step();
  ops.begin_step();
  EXPECT_TRUE(ops.profile().decode.empty());
  EXPECT_EQ(ops.profile().prefill.steps, 0);
  EXPECT_NE(ops.report().find("decode steps: none"), std::string::npos);
}

}  // namespace
}  // namespace mx
