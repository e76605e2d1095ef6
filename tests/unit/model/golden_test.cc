// The CPU backend against golden logits from a reference implementation
// (tools/golden_logits.py: transformers in float32, cross-checked with an
// independent float64 numpy implementation; the golden file names which one
// produced it). Each case is a `mxserve synth` checkpoint, regenerated here
// from its preset and seed; its checksum must match the one the goldens were
// made from.
//
// Tolerance on the last-position logits: max |diff| <= t * (1 + max |golden|)
// with t = 1e-4 (W4A16 and non-MXFP4 formats) or 2e-3 (W4A4).
// Both sides use the exactly dequantized weights; the engine computes in F32
// (F32 KV cache here) while the reference is F32 (transformers) or F64
// (numpy), so what differs is summation order and rounding: measured 1e-6..3e-6
// against numpy (2026-11-30), 30x below t. W4A4 adds one more source: an
// activation within a rounding error of an E2M1 decision boundary can land on
// the neighbouring code on one side only; one such flip moves logits by ~1e-3
// on these 3-layer width-256 models, hence the looser t there.
// Greedy continuations must match token for token, except that a step whose
// golden top-1/top-2 margin is below the tolerance ends the comparison (both
// choices are then correct within the tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/greedy.h"
#include "model_test_util.h"

namespace mx {
namespace {

struct GoldenCase {
  std::string name;
};
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

nlohmann::json read_golden(const std::string& name) {
  std::ifstream f(std::string(MX_SOURCE_DIR) + "/tests/golden/" + name + ".json");
  if (!f) throw std::runtime_error("missing golden file tests/golden/" + name + ".json");
  return nlohmann::json::parse(f);
}

class CpuGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(CpuGolden, LogitsAndGreedyContinuationMatchReference) {
  const nlohmann::json g = read_golden(GetParam().name);
  auto dir = test::synth_checkpoint(g["preset"].get<std::string>(), g["seed"].get<uint64_t>());
  ASSERT_EQ(test::checkpoint_checksum(dir), g["checkpoint_checksum"].get<std::string>())
      << "the synth checkpoint changed since tests/golden/" << GetParam().name
      << ".json was made: regenerate the goldens with tools/golden_logits.py (see docs/models.md)";
  if (g.contains("config_override") && !g["config_override"].is_null())
    dir = test::with_config_override(dir, GetParam().name, g["config_override"]);
  const bool w4a4 = g["activations"] == "W4A4";
  auto model = test::load(dir, w4a4 ? ActivationMode::W4A4 : ActivationMode::W4A16);
  RecordProperty("reference", g["reference"].get<std::string>());
  for (const auto& p : g["prompts"]) {
    std::vector<int32_t> prompt = p["ids"].get<std::vector<int32_t>>();
    std::vector<float> golden = p["last_logits"].get<std::vector<float>>();
    std::vector<int32_t> want = p["greedy"].get<std::vector<int32_t>>();
    std::vector<double> margins = p["greedy_margins"].get<std::vector<double>>();
    GreedyOptions o;
    o.max_new_tokens = int64_t(want.size());
    o.kv_dtype = KvCacheDtype::F32;
    o.block_size = 4;  // several blocks per sequence
    GreedyResult r = greedy_generate(*model, prompt, o);
    double scale = 0;
    for (float v : golden) scale = std::max(scale, double(std::fabs(v)));
    const double tol = (w4a4 ? 2e-3 : 1e-4) * (1 + scale);
    const double diff = test::max_abs_diff(r.prompt_logits, golden);
    EXPECT_LE(diff, tol) << GetParam().name << " prompt of " << prompt.size() << " tokens";
    std::cout << "[ golden   ] " << GetParam().name << ": prompt of " << prompt.size()
              << " tokens, max |logit diff| " << diff << " (tolerance " << tol << ")\n";
    for (size_t i = 0; i < want.size(); ++i) {
      if (r.tokens[i] != want[i] && margins[i] < tol) {
        std::cout << "[ golden   ] " << GetParam().name << ": step " << i << " is a near-tie (margin " << margins[i]
                  << "), comparison ends there\n";
        break;
      }
      ASSERT_EQ(r.tokens[i], want[i]) << GetParam().name << ": greedy token " << i << " (golden margin " << margins[i]
                                      << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Synth, CpuGolden,
                         ::testing::Values(GoldenCase{"kimi-k25-mxfp4-w4a16"}, GoldenCase{"kimi-k25-mxfp4-w4a4"},
                                           GoldenCase{"kimi-k25-mxfp4-old-w4a4"}, GoldenCase{"kimi-k25-int4"},
                                           GoldenCase{"deepseek-v3-fp8"}, GoldenCase{"llama"},
                                           GoldenCase{"llama-llama3-rope-tied"}),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           std::string s = info.param.name;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace mx
