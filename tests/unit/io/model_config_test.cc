#include "io/model_config.h"

#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx {
namespace {

using json = nlohmann::json;

json read_config(const std::string& file) {
  std::ifstream in(std::string(MX_SHARED_DIR) + "/data/configs/" + file);
  EXPECT_TRUE(in.good()) << file;
  return json::parse(in);
}

// The shared copy of the Kimi-K2.5 config is a renamed third-party mirror
// ("kite"); restore the upstream model types (SOURCES.md documents the renames).
json kimi_k25_config() {
  json j = read_config("kimi-k2.5-derived-kite.config.json");
  j["model_type"] = "kimi_k25";
  j["text_config"]["model_type"] = "kimi_k2";
  return j;
}

std::string error_of(const json& j) {
  try {
    parse_model_config(j, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, KimiK2Instruct) {
  ModelConfig c = parse_model_config(read_config("kimi-k2-instruct.config.json"), "k2");
  EXPECT_EQ(c.arch, Arch::DeepseekV3);
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_layers, 61);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.head_dim, 192);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.827);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{163585}));
  EXPECT_EQ(c.quantization_config["quant_method"], "fp8");
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(60));
}

TEST(ModelConfig, KimiK25NestedTextConfig) {
  ModelConfig c = parse_model_config(kimi_k25_config(), "k25");
  EXPECT_EQ(c.arch, Arch::DeepseekV3);
  EXPECT_EQ(c.model_type, "kimi_k25");
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 50000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 64.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_ids, (std::vector<int64_t>{163584}));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{163586}));
  // quantization_config lives inside text_config in this file.
  EXPECT_EQ(c.quantization_config["quant_method"], "compressed-tensors");
}

TEST(ModelConfig, YarnBetaDefaultsWhenAbsent) {
  json j = kimi_k25_config();
  j["text_config"]["rope_scaling"].erase("beta_fast");
  j["text_config"]["rope_scaling"].erase("beta_slow");
  ModelConfig c = parse_model_config(j, "k25");
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
}

TEST(ModelConfig, TransformersFiveRopeParameters) {
  json j = read_config("kimi-k2-instruct.config.json");
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 50000.0}, {"factor", 32.0},
                          {"original_max_position_embeddings", 4096}, {"mscale_all_dim", 1.0}};
  ModelConfig c = parse_model_config(j, "k2");
  EXPECT_DOUBLE_EQ(c.rope_theta, 50000.0);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
}

TEST(ModelConfig, QuantizationConfigAtTopLevel) {
  json j = kimi_k25_config();
  j["quantization_config"] = j["text_config"]["quantization_config"];
  j["text_config"].erase("quantization_config");
  EXPECT_EQ(parse_model_config(j, "k25").quantization_config["format"], "pack-quantized");
}

TEST(ModelConfig, EosListAndLlamaDefaults) {
  json j = {{"model_type", "llama"}, {"vocab_size", 1000}, {"hidden_size", 256}, {"num_hidden_layers", 2},
            {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"intermediate_size", 512},
            {"eos_token_id", {128001, 128009}}, {"bos_token_id", 128000}, {"tie_word_embeddings", true},
            {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 8192}}}};
  ModelConfig c = parse_model_config(j, "llama");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128009}));
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_FALSE(c.is_moe_layer(1));
  j["head_dim"] = 64;
  EXPECT_EQ(parse_model_config(j, "llama").head_dim, 64);
}

TEST(ModelConfig, ClearErrors) {
  json k2 = read_config("kimi-k2-instruct.config.json");
  json j = k2;
  j.erase("kv_lora_rank");
  EXPECT_NE(error_of(j).find("missing required key 'kv_lora_rank'"), std::string::npos) << error_of(j);
  j = k2;
  j["hidden_size"] = "7168";
  EXPECT_NE(error_of(j).find("'hidden_size' must be an integer"), std::string::npos) << error_of(j);
  j = k2;
  j["model_type"] = "mamba";
  EXPECT_NE(error_of(j).find("unsupported model_type 'mamba'"), std::string::npos) << error_of(j);
  j = k2;
  j["eos_token_id"] = "x";
  EXPECT_NE(error_of(j).find("eos_token_id"), std::string::npos);
  j = k2;
  j["rope_scaling"]["type"] = "dynamic";
  EXPECT_NE(error_of(j).find("unsupported rope_scaling type 'dynamic'"), std::string::npos) << error_of(j);
  j = k2;
  j["topk_group"] = 2;  // n_group is 1
  EXPECT_NE(error_of(j).find("topk_group"), std::string::npos) << error_of(j);
  json k25 = kimi_k25_config();
  k25.erase("text_config");
  EXPECT_NE(error_of(k25).find("text_config"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(json::object()).find("model_type"), std::string::npos);
}

TEST(ModelConfig, LoadFromFileNamesPath) {
  EXPECT_THROW(load_model_config("/nonexistent/dir/config.json"), InvalidArgument);
  ModelConfig c = load_model_config(std::string(MX_SHARED_DIR) + "/data/configs/kimi-k2-instruct.config.json");
  EXPECT_EQ(c.num_layers, 61);
}

}  // namespace
}  // namespace mx
