// --load-format dummy: weights made from config.json alone, in the formats the
// quantization_config implies, deterministic per seed, and a model runs on
// them; configs that cannot shape the weights are refused with the key.
#include "quant/dummy_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/greedy.h"
#include "quant/synth_checkpoint.h"
#include "quant/weight_loader.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

// A directory with only the config.json of a synth preset (no weights).
fs::path config_only(const std::string& preset) {
  fs::path full = fs::temp_directory_path() / ("mx_dummy_full_" + std::to_string(::getpid()) + "_" + preset);
  fs::path dir = fs::temp_directory_path() / ("mx_dummy_" + std::to_string(::getpid()) + "_" + preset);
  if (!fs::exists(dir / "config.json")) {
    write_synthetic_checkpoint(full, preset, 1);
    fs::create_directories(dir);
    fs::copy_file(full / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    fs::remove_all(full);
  }
  return dir;
}

GreedyResult run(const fs::path& dir, uint64_t seed) {
  LoadOptions o;
  o.load_format = "dummy";
  o.dummy_seed = seed;
  o.num_threads = 2;
  auto model = load_causal_lm(dir, o);
  GreedyOptions g;
  g.max_new_tokens = 3;
  return greedy_generate(*model, {1, 2, 3, 4, 5}, g);
}

TEST(DummySource, KimiMxfp4HasTheQuarkLayout) {
  ModelConfig c = load_model_config(config_only("kimi-k25-mxfp4"));
  DummyTensorSource src(c, 0);
  WeightLoader w(c, src);
  LinearWeight expert = w.linear("model.layers.1.mlp.experts.3.down_proj");
  EXPECT_EQ(expert.format, WeightFormat::Mxfp4);
  EXPECT_EQ(expert.out_features, c.hidden_size);
  EXPECT_EQ(expert.in_features, c.moe_intermediate_size);
  EXPECT_TRUE(expert.quantize_input);  // the Quark config's dynamic fp4 inputs
  EXPECT_EQ(w.linear("model.layers.1.mlp.gate").format, WeightFormat::Dense);
  EXPECT_EQ(w.linear("model.layers.0.self_attn.kv_b_proj").format, WeightFormat::Dense);
  EXPECT_TRUE(src.has("language_model.model.layers.1.mlp.gate.e_score_correction_bias"));
  // Sensible magnitudes: weight RMS near 1/sqrt(fan in), every E8M0 scale valid.
  Tensor full = dequantize_to_f32(expert);
  double sq = 0;
  for (float v : full.to_f32_vector()) sq += double(v) * v;
  const double rms = std::sqrt(sq / double(full.numel())), want = 1.0 / std::sqrt(double(expert.in_features));
  EXPECT_GT(rms, 0.4 * want);
  EXPECT_LT(rms, 2.5 * want);
  for (int64_t i = 0; i < expert.scale.numel(); ++i) ASSERT_LT(expert.scale.data<uint8_t>()[i], 255);
  Tensor norm = w.tensor("model.layers.0.input_layernorm.weight");
  EXPECT_NEAR(norm.get_f32(0), 1.0, 0.3);
  EXPECT_NE(src.summary().find("mxfp4: "), std::string::npos) << src.summary();
}

TEST(DummySource, OtherQuantizationConfigsGetTheirFormats) {
  ModelConfig fp8 = load_model_config(config_only("deepseek-v3-fp8"));
  DummyTensorSource f(fp8, 0);
  EXPECT_EQ(WeightLoader(fp8, f).linear("model.layers.0.self_attn.q_a_proj").format, WeightFormat::Fp8Block);
  ModelConfig int4 = load_model_config(config_only("kimi-k25-int4"));
  DummyTensorSource i(int4, 0);
  EXPECT_EQ(WeightLoader(int4, i).linear("model.layers.1.mlp.experts.0.up_proj").format, WeightFormat::Int4Group);
  ModelConfig llama = load_model_config(config_only("llama"));
  DummyTensorSource l(llama, 0);
  EXPECT_EQ(WeightLoader(llama, l).linear("model.layers.0.mlp.up_proj").format, WeightFormat::Dense);
}

TEST(DummySource, SameSeedSameLogitsOtherSeedOther) {
  const fs::path dir = config_only("kimi-k25-mxfp4");
  GreedyResult a = run(dir, 3), b = run(dir, 3), c = run(dir, 4);
  EXPECT_EQ(a.prompt_logits, b.prompt_logits);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.prompt_logits, c.prompt_logits);
  for (float v : a.prompt_logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(DummySource, RunsEveryPreset) {
  for (const char* preset : {"llama", "deepseek-v3-fp8", "kimi-k25-int4", "kimi-k25-mxfp4-old"}) {
    GreedyResult r = run(config_only(preset), 0);
    EXPECT_EQ(r.tokens.size(), 3u) << preset;
    for (float v : r.prompt_logits) ASSERT_TRUE(std::isfinite(v)) << preset;
  }
}

TEST(DummySource, ConfigsThatCannotShapeTheWeightsAreRefused) {
  ModelConfig c = load_model_config(config_only("kimi-k25-mxfp4"));
  c.hidden_size = 100;  // MXFP4 experts need inputs in whole groups of 32
  try {
    DummyTensorSource src(c, 0);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 32"), std::string::npos) << e.what();
  }
  ModelConfig l = load_model_config(config_only("llama"));
  l.vocab_size = 0;
  try {
    DummyTensorSource src(l, 0);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'vocab_size'"), std::string::npos) << e.what();
  }
}

TEST(DummySource, UnknownNamesAndFormatsAreErrors) {
  ModelConfig c = load_model_config(config_only("llama"));
  DummyTensorSource src(c, 0);
  EXPECT_FALSE(src.has("model.layers.9.mlp.up_proj.weight"));
  EXPECT_THROW(src.get("model.layers.9.mlp.up_proj.weight"), Error);
  LoadOptions o;
  o.load_format = "random";
  EXPECT_THROW(load_causal_lm(config_only("llama"), o), InvalidArgument);
}

}  // namespace
}  // namespace mx
