#include "quant/weight_loader.h"

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "io/safetensors_writer.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/mxfp4.h"

namespace mx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json llama_config() {
  return {{"model_type", "llama"},       {"vocab_size", 64},          {"hidden_size", 64},
          {"num_hidden_layers", 1},      {"num_attention_heads", 2},  {"intermediate_size", 128}};
}

json quark_config(bool dynamic_inputs) {
  json spec = {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32}, {"scale_format", "e8m0"}};
  json g = {{"weight", spec}};
  if (dynamic_inputs) {
    spec["is_dynamic"] = true;
    g["input_tensors"] = spec;
  }
  return {{"quant_method", "quark"}, {"global_quant_config", g}, {"exclude", {"lm_head", "re:.*self_attn.*"}}};
}

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = round_bf16(float((i * 37) % 101 - 50) / 64.f);
  return v;
}

class WeightLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mx_wl_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the tensors and opens them with a config built from `quant` and `prefix`.
  void load(const NamedTensors& tensors, const json& quant, const std::string& prefix = "") {
    write_safetensors(dir_ / "model.safetensors", tensors);
    source_ = open_safetensors(dir_);
    json cfg = llama_config();
    if (!quant.is_null()) cfg["quantization_config"] = quant;
    config_ = parse_model_config(cfg, "test config");
    config_.tensor_prefix = prefix;
    loader_ = std::make_unique<WeightLoader>(config_, *source_);
  }

  std::string error_of(const std::string& linear) {
    try {
      loader_->linear(linear);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::unique_ptr<TensorSource> source_;
  ModelConfig config_;
  std::unique_ptr<WeightLoader> loader_;
};

NamedTensors mxfp4_linear(const std::string& base, int64_t out, int64_t in) {
  Mxfp4Matrix m = mxfp4_quantize_matrix(ramp(out * in).data(), out, in);
  return {{base + ".weight", m.weight}, {base + ".weight_scale", m.scale}};
}

TEST_F(WeightLoaderTest, DecidesFromTheFile) {
  NamedTensors t = mxfp4_linear("model.layers.0.mlp.down_proj", 64, 128);
  Fp8BlockMatrix f8 = fp8_block_quantize(ramp(200 * 256).data(), 200, 256);
  Int4GroupMatrix i4 = int4_group_quantize(ramp(64 * 64).data(), 64, 64, 32);
  t.push_back({"model.layers.0.self_attn.q_proj.weight", Tensor::from_f32(ramp(64 * 64), {64, 64}).to(DType::BF16)});
  t.push_back({"model.layers.0.self_attn.q_proj.bias", Tensor::from_f32(ramp(64), {64}).to(DType::BF16)});
  load(t, quark_config(true));
  LinearWeight mx = loader_->linear("model.layers.0.mlp.down_proj");
  EXPECT_EQ(mx.format, WeightFormat::Mxfp4);
  EXPECT_EQ(mx.out_features, 64);
  EXPECT_EQ(mx.in_features, 128);
  EXPECT_EQ(mx.group_size, 32);
  EXPECT_EQ(mx.scale.describe(), "u8[64, 4]");
  EXPECT_TRUE(mx.quantize_input);
  LinearWeight q = loader_->linear("model.layers.0.self_attn.q_proj");
  EXPECT_EQ(q.format, WeightFormat::Dense);
  EXPECT_FALSE(q.quantize_input);
  EXPECT_EQ(q.bias.describe(), "f32[64]");
  EXPECT_EQ(dequantize_to_f32(mx).describe(), "f32[64, 128]");

  load({{"a.weight", f8.weight}, {"a.weight_scale_inv", f8.scale_inv}}, json());
  LinearWeight fp = loader_->linear("a");
  EXPECT_EQ(fp.format, WeightFormat::Fp8Block);
  EXPECT_EQ(fp.scale.describe(), "f32[2, 2]");
  EXPECT_EQ(fp.group_size, 128);

  Tensor shape = Tensor::empty(DType::I32, {2});
  shape.data<int32_t>()[0] = 64;
  shape.data<int32_t>()[1] = 64;
  load({{"b.weight_packed", i4.packed}, {"b.weight_scale", i4.scale}, {"b.weight_shape", shape}}, json());
  LinearWeight q4 = loader_->linear("b");
  EXPECT_EQ(q4.format, WeightFormat::Int4Group);
  EXPECT_EQ(q4.group_size, 32);
  EXPECT_EQ(q4.in_features, 64);
}

TEST_F(WeightLoaderTest, W4A16CheckpointDoesNotQuantizeInputs) {
  load(mxfp4_linear("x", 32, 64), quark_config(false));
  EXPECT_FALSE(loader_->linear("x").quantize_input);
}

TEST_F(WeightLoaderTest, PrefixAndFallback) {
  load({{"language_model.model.norm.weight", Tensor::from_f32({1, 2}, {2})},
        {"language_model.lm_head.weight", Tensor::from_f32(ramp(64), {2, 32})},
        {"bare.weight", Tensor::from_f32(ramp(64), {2, 32})}},
       json(), "language_model.");
  EXPECT_EQ(loader_->tensor("model.norm.weight").get_f32(1), 2.f);
  EXPECT_EQ(loader_->linear("lm_head").name, "language_model.lm_head");
  EXPECT_EQ(loader_->linear("bare").name, "bare");  // unprefixed names still resolve
  EXPECT_TRUE(loader_->has("model.norm.weight"));
  EXPECT_FALSE(loader_->has("model.embed_tokens.weight"));
  try {
    loader_->tensor("model.embed_tokens.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("language_model.model.embed_tokens.weight"), std::string::npos) << e.what();
  }
  EXPECT_NE(error_of("model.layers.0.mlp.up_proj").find("language_model.model.layers.0.mlp.up_proj.weight"),
            std::string::npos);
}

TEST_F(WeightLoaderTest, BadTensorsGiveClearErrors) {
  Mxfp4Matrix m = mxfp4_quantize_matrix(ramp(32 * 64).data(), 32, 64);
  Fp8BlockMatrix f8 = fp8_block_quantize(ramp(128 * 128).data(), 128, 128);
  load({{"no_scale.weight", m.weight},
        {"bad_scale.weight", m.weight},
        {"bad_scale.weight_scale", m.scale.slice_rows(0, 16)},
        {"fp8.weight", f8.weight},
        {"fp8.weight_scale_inv", f8.scale_inv},
        {"per_tensor.weight", f8.weight},
        {"per_tensor.weight_scale", Tensor::from_f32({1.f}, {1})},
        {"vec.weight", Tensor::from_f32({1, 2}, {2})},
        {"ints.weight", Tensor::empty(DType::I64, {2, 2})}},
       quark_config(true));
  EXPECT_NE(error_of("no_scale").find("without a .weight_scale"), std::string::npos) << error_of("no_scale");
  EXPECT_NE(error_of("bad_scale").find("'bad_scale.weight_scale': shape [16, 2] but bad_scale expects [32, 2]"),
            std::string::npos) << error_of("bad_scale");
  EXPECT_NE(error_of("fp8").find("stored as fp8-block but quantization_config declares quark mxfp4"), std::string::npos)
      << error_of("fp8");
  EXPECT_NE(error_of("per_tensor").find("per-tensor"), std::string::npos) << error_of("per_tensor");
  EXPECT_NE(error_of("vec").find("must be 2-D"), std::string::npos) << error_of("vec");
  EXPECT_NE(error_of("ints").find("dtype i64"), std::string::npos) << error_of("ints");
  EXPECT_NE(error_of("fp8").find("model.safetensors"), std::string::npos);  // names the file
}

TEST_F(WeightLoaderTest, Int4ShapeAndGroupChecks) {
  Int4GroupMatrix i4 = int4_group_quantize(ramp(8 * 64).data(), 8, 64, 32);
  Tensor shape = Tensor::empty(DType::I32, {2});
  shape.data<int32_t>()[0] = 8;
  shape.data<int32_t>()[1] = 60;  // padded: not supported
  json ct = {{"quant_method", "compressed-tensors"},
             {"format", "pack-quantized"},
             {"config_groups", {{"g", {{"weights", {{"num_bits", 4}, {"type", "int"}, {"symmetric", true},
                                                   {"strategy", "group"}, {"group_size", 32}}}}}}}};
  load({{"p.weight_packed", i4.packed}, {"p.weight_scale", i4.scale}, {"p.weight_shape", shape},
        {"g.weight_packed", i4.packed}, {"g.weight_scale", Tensor::empty(DType::BF16, {8, 4})}},
       ct);
  EXPECT_NE(error_of("p").find("padded"), std::string::npos) << error_of("p");
  EXPECT_NE(error_of("g").find("group size 16 but quantization_config says 32"), std::string::npos) << error_of("g");
}

TEST_F(WeightLoaderTest, ConstructorRefusesUnsupportedSpecs) {
  write_safetensors(dir_ / "model.safetensors", {{"x.weight", Tensor::from_f32({1}, {1, 1})}});
  auto src = open_safetensors(dir_);
  ModelConfig c = parse_model_config(llama_config(), "cfg");
  c.quantization_config = {{"quant_method", "gptq"}, {"bits", 4}};
  EXPECT_THROW(WeightLoader(c, *src), InvalidArgument);
  c.quantization_config = quark_config(true);
  c.quantization_config["global_quant_config"]["weight"]["group_size"] = 16;
  try {
    WeightLoader loader(c, *src);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("group_size 16"), std::string::npos);
  }
}

}  // namespace
}  // namespace mx
