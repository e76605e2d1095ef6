#include "quant/quant_spec.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx {
namespace {

using json = nlohmann::json;

json quark_spec(bool dynamic) {
  return {{"dtype", "fp4"},        {"qscheme", "per_group"}, {"ch_axis", -1},
          {"group_size", 32},      {"is_dynamic", dynamic},  {"scale_format", "e8m0"},
          {"scale_type", "float"}, {"round_method", "half_even"}};
}

json quark() {
  return {{"quant_method", "quark"},
          {"global_quant_config", {{"weight", quark_spec(false)}, {"input_tensors", quark_spec(true)}, {"output_tensors", nullptr}}},
          {"layer_quant_config", json::object()},
          {"layer_type_quant_config", json::object()},
          {"exclude", {"lm_head", "re:.*self_attn.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}}};
}

std::string error_of(const json& qc) {
  try {
    parse_quant_spec(qc, "cfg");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(QuantSpec, QuarkMxfp4) {
  QuantSpec s = parse_quant_spec(quark(), "cfg");
  EXPECT_EQ(s.method, QuantMethod::QuarkMxfp4);
  EXPECT_EQ(s.group_size, 32);
  EXPECT_TRUE(s.dynamic_fp4_inputs);
  json w4a16 = quark();
  w4a16["global_quant_config"]["input_tensors"] = nullptr;
  EXPECT_FALSE(parse_quant_spec(w4a16, "cfg").dynamic_fp4_inputs);
}

TEST(QuantSpec, ExcludeSemantics) {
  QuantSpec s = parse_quant_spec(quark(), "cfg");
  const std::string p = "language_model.";
  EXPECT_TRUE(s.is_excluded("language_model.model.layers.3.self_attn.q_a_proj", p));
  EXPECT_TRUE(s.is_excluded("language_model.lm_head", p));       // exact name after the prefix
  EXPECT_TRUE(s.is_excluded("lm_head", ""));
  EXPECT_FALSE(s.is_excluded("model.lm_head", ""));              // exact means exact
  EXPECT_TRUE(s.is_excluded("model.layers.0.mlp.down_proj", ""));
  EXPECT_FALSE(s.is_excluded("model.layers.1.mlp.experts.0.down_proj", ""));
  EXPECT_FALSE(s.is_excluded("model.layers.1.mlp.gate", ""));    // the router is not matched
  // re: is anchored at the start (Python re.match), not a search.
  QuantSpec anchored = parse_quant_spec(json{{"quant_method", "quark"},
                                             {"global_quant_config", {{"weight", quark_spec(false)}}},
                                             {"exclude", {"re:self_attn", "re:model\\.layers\\.0\\."}}},
                                        "cfg");
  EXPECT_FALSE(anchored.is_excluded("model.layers.1.self_attn.o_proj", ""));
  EXPECT_TRUE(anchored.is_excluded("self_attn.o_proj", ""));
  EXPECT_TRUE(anchored.is_excluded("model.layers.0.mlp.up_proj", ""));
  EXPECT_FALSE(anchored.is_excluded("model.layers.10.mlp.up_proj", ""));
}

TEST(QuantSpec, RefusesUnsupportedQuark) {
  json j = quark();
  j["global_quant_config"]["weight"]["group_size"] = 16;
  EXPECT_NE(error_of(j).find("group_size 16 is not supported"), std::string::npos) << error_of(j);
  j = quark();
  j["global_quant_config"]["weight"]["scale_format"] = "fp8_e4m3";
  EXPECT_NE(error_of(j).find("scale_format 'fp8_e4m3'"), std::string::npos) << error_of(j);
  j = quark();
  j["global_quant_config"]["weight"]["dtype"] = "int4";
  EXPECT_NE(error_of(j).find("dtype 'int4'"), std::string::npos) << error_of(j);
  j = quark();
  j["global_quant_config"]["input_tensors"]["dtype"] = "fp8_e4m3";
  EXPECT_NE(error_of(j).find("input_tensors"), std::string::npos) << error_of(j);
  j = quark();
  j["layer_quant_config"] = {{"model.layers.0.*", quark_spec(false)}};
  EXPECT_NE(error_of(j).find("layer_quant_config"), std::string::npos) << error_of(j);
  j = quark();
  j["exclude"] = {"re:("};
  EXPECT_NE(error_of(j).find("re:("), std::string::npos) << error_of(j);
  j = quark();
  j["global_quant_config"]["weight"]["group_size"] = "32";
  EXPECT_NE(error_of(j).find("group_size"), std::string::npos) << error_of(j);
}

TEST(QuantSpec, UnknownMethod) {
  EXPECT_NE(error_of({{"quant_method", "awq"}}).find("quant_method 'awq' is not supported"), std::string::npos);
  EXPECT_NE(error_of({{"bits", 4}}).find("quant_method ''"), std::string::npos);
}

TEST(QuantSpec, Fp8Block) {
  json j = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  QuantSpec s = parse_quant_spec(j, "cfg");
  EXPECT_EQ(s.method, QuantMethod::Fp8Block);
  EXPECT_EQ(s.group_size, 128);
  j["weight_block_size"] = {64, 64};
  EXPECT_NE(error_of(j).find("weight_block_size [64,64]"), std::string::npos) << error_of(j);
  j["weight_block_size"] = {128, 128};
  j["activation_scheme"] = "static";
  EXPECT_NE(error_of(j).find("static"), std::string::npos);
}

TEST(QuantSpec, CompressedTensorsInt4) {
  json weights = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"}, {"group_size", 32}, {"actorder", nullptr}};
  json j = {{"quant_method", "compressed-tensors"},
            {"format", "pack-quantized"},
            {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"input_activations", nullptr}, {"weights", weights}}}}},
            {"ignore", {"lm_head", "re:.*self_attn.*"}}};
  QuantSpec s = parse_quant_spec(j, "cfg");
  EXPECT_EQ(s.method, QuantMethod::CompressedInt4);
  EXPECT_TRUE(s.is_excluded("lm_head", ""));
  json bad = j;
  bad["config_groups"]["group_0"]["weights"]["group_size"] = 128;
  EXPECT_NE(error_of(bad).find("group_size 128"), std::string::npos) << error_of(bad);
  bad = j;
  bad["format"] = "int-quantized";
  EXPECT_NE(error_of(bad).find("int-quantized"), std::string::npos);
  bad = j;
  bad["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
  EXPECT_NE(error_of(bad).find("input_activations"), std::string::npos);
}

TEST(QuantSpec, NoneWhenAbsent) { EXPECT_EQ(parse_quant_spec(json(), "cfg").method, QuantMethod::None); }

}  // namespace
}  // namespace mx
