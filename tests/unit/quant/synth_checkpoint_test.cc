// Every synth preset loads back through the real readers with the formats its
// layout promises, per tensor, for both MXFP4 exclude revisions.
#include "quant/synth_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <gtest/gtest.h>

#include "core/error.h"
#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/weight_loader.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mx_synth_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void open(const std::string& preset, uint64_t seed = 1, const fs::path& sub = "a") {
    write_synthetic_checkpoint(dir_ / sub, preset, seed);
    config_ = load_model_config(dir_ / sub);
    source_ = open_safetensors(dir_ / sub);
    loader_ = std::make_unique<WeightLoader>(config_, *source_);
  }
  WeightFormat format(const std::string& linear) const { return loader_->linear(linear).format; }

  fs::path dir_;
  ModelConfig config_;
  std::unique_ptr<TensorSource> source_;
  std::unique_ptr<WeightLoader> loader_;
};

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_clean_survey(const WeightLoader& loader) {
  CheckpointSurvey s = loader.survey();
  EXPECT_TRUE(s.errors.empty()) << (s.errors.empty() ? "" : s.errors.front());
  EXPECT_EQ(s.exclude_mismatches, 0) << loader.summary();
}

TEST_F(SynthTest, KimiMxfp4NewRevision) {
  open("kimi-k25-mxfp4");
  EXPECT_EQ(config_.model_type, "kimi_k25");
  EXPECT_EQ(config_.tensor_prefix, "language_model.");
  EXPECT_EQ(config_.q_lora_rank, 1536);
  EXPECT_EQ(config_.kv_lora_rank, 512);
  EXPECT_EQ(config_.qk_nope_head_dim, 128);
  EXPECT_EQ(config_.qk_rope_head_dim, 64);
  EXPECT_EQ(config_.v_head_dim, 128);
  LinearWeight expert = loader_->linear("model.layers.1.mlp.experts.0.gate_proj");
  EXPECT_EQ(expert.format, WeightFormat::Mxfp4);
  EXPECT_TRUE(expert.quantize_input);
  EXPECT_EQ(format("model.layers.2.mlp.experts.7.down_proj"), WeightFormat::Mxfp4);
  EXPECT_EQ(format("model.layers.1.mlp.shared_experts.up_proj"), WeightFormat::Mxfp4);
  EXPECT_EQ(format("model.layers.0.mlp.down_proj"), WeightFormat::Mxfp4);
  EXPECT_EQ(format("model.layers.1.self_attn.kv_b_proj"), WeightFormat::Dense);
  EXPECT_EQ(format("model.layers.1.mlp.gate"), WeightFormat::Dense);
  EXPECT_EQ(format("lm_head"), WeightFormat::Dense);
  EXPECT_EQ(loader_->tensor("model.layers.1.mlp.gate.e_score_correction_bias").dtype(), DType::F32);
  EXPECT_EQ(loader_->tensor("model.norm.weight").dtype(), DType::BF16);
  CheckpointSurvey s = loader_->survey();
  EXPECT_EQ(s.skipped_tensors, 6);  // the vision_tower / mm_projector dummies
  expect_clean_survey(*loader_);
  // Real quantization of random floats: block scales differ.
  std::set<uint8_t> scales;
  for (int64_t i = 0; i < expert.scale.numel(); ++i) scales.insert(expert.scale.data<uint8_t>()[i]);
  EXPECT_GE(scales.size(), 3u);
  EXPECT_LT(fs::file_size(dir_ / "a" / "model.safetensors"), 15u << 20);
}

TEST_F(SynthTest, KimiMxfp4OldRevision) {
  open("kimi-k25-mxfp4-old");
  EXPECT_EQ(format("model.layers.1.mlp.experts.3.up_proj"), WeightFormat::Mxfp4);
  EXPECT_EQ(format("model.layers.1.mlp.shared_experts.up_proj"), WeightFormat::Dense);
  EXPECT_EQ(format("model.layers.0.mlp.gate_proj"), WeightFormat::Dense);
  EXPECT_EQ(format("model.layers.0.self_attn.q_b_proj"), WeightFormat::Dense);
  expect_clean_survey(*loader_);
  EXPECT_NE(loader_->summary().find("mxfp4: 48 linears"), std::string::npos) << loader_->summary();  // 2 layers x 8 x 3
}

TEST_F(SynthTest, KimiInt4) {
  open("kimi-k25-int4");
  LinearWeight w = loader_->linear("model.layers.2.mlp.experts.5.down_proj");
  EXPECT_EQ(w.format, WeightFormat::Int4Group);
  EXPECT_EQ(w.group_size, 32);
  EXPECT_EQ(w.in_features, config_.moe_intermediate_size);
  EXPECT_EQ(w.scale.dtype(), DType::BF16);
  EXPECT_EQ(format("model.layers.1.mlp.shared_experts.down_proj"), WeightFormat::Dense);
  EXPECT_EQ(loader_->spec().method, QuantMethod::CompressedInt4);
  expect_clean_survey(*loader_);
}

TEST_F(SynthTest, DeepseekFp8) {
  open("deepseek-v3-fp8");
  EXPECT_EQ(config_.model_type, "deepseek_v3");
  EXPECT_EQ(config_.tensor_prefix, "");
  EXPECT_EQ(config_.n_group, 4);
  EXPECT_EQ(config_.topk_group, 2);
  EXPECT_EQ(config_.first_k_dense_replace, 1);
  LinearWeight kv_a = loader_->linear("model.layers.0.self_attn.kv_a_proj_with_mqa");
  EXPECT_EQ(kv_a.format, WeightFormat::Fp8Block);
  EXPECT_EQ(kv_a.scale.shape(), (Shape{5, 2}));  // ceil(576/128), ceil(256/128)
  EXPECT_EQ(format("model.layers.1.mlp.experts.0.up_proj"), WeightFormat::Fp8Block);
  EXPECT_EQ(format("model.layers.0.mlp.down_proj"), WeightFormat::Fp8Block);
  EXPECT_EQ(format("model.layers.1.mlp.gate"), WeightFormat::Dense);
  EXPECT_EQ(format("lm_head"), WeightFormat::Dense);
  expect_clean_survey(*loader_);
}

TEST_F(SynthTest, Llama) {
  open("llama");
  EXPECT_EQ(config_.arch, Arch::Llama);
  EXPECT_EQ(config_.num_kv_heads, 2);
  EXPECT_FALSE(config_.tie_word_embeddings);
  LinearWeight k = loader_->linear("model.layers.1.self_attn.k_proj");
  EXPECT_EQ(k.format, WeightFormat::Dense);
  EXPECT_EQ(k.out_features, 64);
  // std ~ 1/sqrt(fan_in) keeps activations O(1).
  std::vector<float> w = dequantize_to_f32(loader_->linear("model.layers.0.mlp.down_proj")).to_f32_vector();
  double sq = 0;
  for (float v : w) sq += double(v) * v;
  EXPECT_NEAR(std::sqrt(sq / double(w.size())), 1.0 / std::sqrt(512.0), 0.2 / std::sqrt(512.0));
  EXPECT_TRUE(loader_->has("lm_head.weight"));
}

TEST_F(SynthTest, DeterministicGivenSeed) {
  write_synthetic_checkpoint(dir_ / "x", "kimi-k25-mxfp4", 7);
  write_synthetic_checkpoint(dir_ / "y", "kimi-k25-mxfp4", 7);
  write_synthetic_checkpoint(dir_ / "z", "kimi-k25-mxfp4", 8);
  EXPECT_EQ(file_bytes(dir_ / "x" / "model.safetensors"), file_bytes(dir_ / "y" / "model.safetensors"));
  EXPECT_NE(file_bytes(dir_ / "x" / "model.safetensors"), file_bytes(dir_ / "z" / "model.safetensors"));
}

TEST_F(SynthTest, UnknownPreset) { EXPECT_THROW(write_synthetic_checkpoint(dir_, "gpt-oss", 1), InvalidArgument); }

}  // namespace
}  // namespace mx
