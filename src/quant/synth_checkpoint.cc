#include "quant/synth_checkpoint.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "io/safetensors_writer.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/linear_weight.h"
#include "quant/mxfp4.h"
#include "quant/synth_values.h"

namespace mx {

namespace {

using ojson = nlohmann::ordered_json;

// mt19937_64 is specified bit for bit by the standard, std::normal_distribution
// is not: Box-Muller on top keeps checkpoints identical across toolchains.
class Rng {
 public:
  Rng(uint64_t seed, const std::string& name) : gen_(seed ^ fnv1a64(name)) {}
  double uniform() { return double(gen_() >> 11) * 0x1.0p-53; }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 gen_;
};

// Collects named tensors; every value is BF16-representable before quantizing.
class Builder {
 public:
  explicit Builder(uint64_t seed) : seed_(seed) {}

  // Random [out, in] weights, std 1/sqrt(in). Each 32-block gets a factor
  // 2^{-1,0,1} so MXFP4/INT4 scales differ between blocks.
  std::vector<float> random_weight(const std::string& name, int64_t out, int64_t in) {
    Rng rng(seed_, name);
    const double stddev = synth::weight_stddev(in);
    std::vector<float> w(size_t(out * in));
    for (size_t b = 0; b < w.size(); b += synth::kFactorBlock) {
      double factor = synth::block_factor(rng.uniform());
      for (size_t i = b; i < std::min(w.size(), b + synth::kFactorBlock); ++i)
        w[i] = round_bf16(float(rng.normal() * stddev * factor));
    }
    return w;
  }

  void linear(const std::string& base, int64_t out, int64_t in, WeightFormat format) {
    std::vector<float> w = random_weight(base + ".weight", out, in);
    switch (format) {
      case WeightFormat::Dense: add(base + ".weight", Tensor::from_f32(w, {out, in}).to(DType::BF16)); break;
      case WeightFormat::Mxfp4: {
        Mxfp4Matrix m = mxfp4_quantize_matrix(w.data(), out, in);
        add(base + ".weight", m.weight);
        add(base + ".weight_scale", m.scale);
        break;
      }
      case WeightFormat::Fp8Block: {
        Fp8BlockMatrix m = fp8_block_quantize(w.data(), out, in);
        add(base + ".weight", m.weight);
        add(base + ".weight_scale_inv", m.scale_inv);
        break;
      }
      case WeightFormat::Int4Group: {
        Int4GroupMatrix m = int4_group_quantize(w.data(), out, in, 32);
        add(base + ".weight_packed", m.packed);
        add(base + ".weight_scale", m.scale);
        Tensor shape = Tensor::empty(DType::I32, {2});
        shape.data<int32_t>()[0] = int32_t(out);
        shape.data<int32_t>()[1] = int32_t(in);
        add(base + ".weight_shape", shape);
        break;
      }
    }
  }

  // BF16 values mean + stddev * N(0,1).
  void random_bf16(const std::string& name, Shape shape, double mean, double stddev) {
    add(name, random_f32(name, std::move(shape), mean, stddev).to(DType::BF16));
  }
  Tensor random_f32(const std::string& name, Shape shape, double mean, double stddev) {
    Rng rng(seed_, name);
    std::vector<float> v(size_t(shape_numel(shape)));
    for (auto& x : v) x = round_bf16(float(mean + stddev * rng.normal()));
    return Tensor::from_f32(v, std::move(shape));
  }
  void norm(const std::string& name, int64_t dim) { random_bf16(name, {dim}, synth::kNormMean, synth::kNormStd); }
  void add(const std::string& name, Tensor t) { tensors_.emplace_back(name, std::move(t)); }
  const NamedTensors& tensors() const { return tensors_; }

 private:
  uint64_t seed_;
  NamedTensors tensors_;
};

// ---- model shapes --------------------------------------------------------------

struct DeepseekShape {
  int64_t vocab = 1024, hidden = 256, layers = 3, heads = 2;
  int64_t q_lora = 1536, kv_lora = 512, nope = 128, rope = 64, v = 128;
  int64_t intermediate = 512, moe_intermediate = 128, experts = 8, top_k = 4, shared = 1;
  int64_t first_dense = 1, n_group = 1, topk_group = 1;
};

// Which format each Linear gets, by its name relative to "model.layers.L.".
using FormatOf = std::function<WeightFormat(const std::string& name)>;

void emit_deepseek(Builder& b, const DeepseekShape& s, const std::string& prefix, const FormatOf& format_of) {
  auto lin = [&](const std::string& name, int64_t out, int64_t in) { b.linear(prefix + name, out, in, format_of(name)); };
  b.random_bf16(prefix + "model.embed_tokens.weight", {s.vocab, s.hidden}, 0.0, synth::kEmbedStd);
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    b.norm(prefix + p + "input_layernorm.weight", s.hidden);
    b.norm(prefix + p + "post_attention_layernorm.weight", s.hidden);
    lin(p + "self_attn.q_a_proj", s.q_lora, s.hidden);
    b.norm(prefix + p + "self_attn.q_a_layernorm.weight", s.q_lora);
    lin(p + "self_attn.q_b_proj", s.heads * (s.nope + s.rope), s.q_lora);
    lin(p + "self_attn.kv_a_proj_with_mqa", s.kv_lora + s.rope, s.hidden);
    b.norm(prefix + p + "self_attn.kv_a_layernorm.weight", s.kv_lora);
    lin(p + "self_attn.kv_b_proj", s.heads * (s.nope + s.v), s.kv_lora);
    lin(p + "self_attn.o_proj", s.hidden, s.heads * s.v);
    if (l < s.first_dense) {
      lin(p + "mlp.gate_proj", s.intermediate, s.hidden);
      lin(p + "mlp.up_proj", s.intermediate, s.hidden);
      lin(p + "mlp.down_proj", s.hidden, s.intermediate);
      continue;
    }
    lin(p + "mlp.gate", s.experts, s.hidden);
    b.add(prefix + p + "mlp.gate.e_score_correction_bias",
          b.random_f32(prefix + p + "mlp.gate.e_score_correction_bias", {s.experts}, 0.0, synth::kCorrectionBiasStd));
    for (int64_t e = 0; e < s.experts; ++e) {
      std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      lin(ep + "gate_proj", s.moe_intermediate, s.hidden);
      lin(ep + "up_proj", s.moe_intermediate, s.hidden);
      lin(ep + "down_proj", s.hidden, s.moe_intermediate);
    }
    int64_t shared = s.moe_intermediate * s.shared;
    lin(p + "mlp.shared_experts.gate_proj", shared, s.hidden);
    lin(p + "mlp.shared_experts.up_proj", shared, s.hidden);
    lin(p + "mlp.shared_experts.down_proj", s.hidden, shared);
  }
  b.norm(prefix + "model.norm.weight", s.hidden);
  b.linear(prefix + "lm_head", s.vocab, s.hidden, WeightFormat::Dense);
}

// Tiny stand-ins for the MoonViT tower and projector: the text model must skip them.
void emit_vision_dummies(Builder& b) {
  b.random_bf16("vision_tower.patch_embed.proj.weight", {16, 3, 14, 14}, 0.0, 0.02);
  b.random_bf16("vision_tower.encoder.blocks.0.wqkv.weight", {48, 16}, 0.0, 0.02);
  b.random_bf16("vision_tower.encoder.blocks.0.norm0.weight", {16}, 1.0, 0.0);
  b.random_bf16("mm_projector.pre_norm.weight", {64}, 1.0, 0.0);
  b.random_bf16("mm_projector.proj.0.weight", {64, 64}, 0.0, 0.02);
  b.random_bf16("mm_projector.proj.2.weight", {256, 64}, 0.0, 0.02);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// ---- configs ---------------------------------------------------------------------

ojson deepseek_text_config(const DeepseekShape& s, const std::string& model_type) {
  return ojson{{"architectures", {"DeepseekV3ForCausalLM"}},
               {"model_type", model_type},
               {"vocab_size", s.vocab},
               {"hidden_size", s.hidden},
               {"intermediate_size", s.intermediate},
               {"moe_intermediate_size", s.moe_intermediate},
               {"num_hidden_layers", s.layers},
               {"num_nextn_predict_layers", 0},
               {"num_attention_heads", s.heads},
               {"num_key_value_heads", s.heads},
               {"n_shared_experts", s.shared},
               {"n_routed_experts", s.experts},
               {"routed_scaling_factor", 2.827},
               {"kv_lora_rank", s.kv_lora},
               {"q_lora_rank", s.q_lora},
               {"qk_rope_head_dim", s.rope},
               {"v_head_dim", s.v},
               {"qk_nope_head_dim", s.nope},
               {"topk_method", "noaux_tc"},
               {"n_group", s.n_group},
               {"topk_group", s.topk_group},
               {"num_experts_per_tok", s.top_k},
               {"moe_layer_freq", 1},
               {"first_k_dense_replace", s.first_dense},
               {"norm_topk_prob", true},
               {"scoring_func", "sigmoid"},
               {"aux_loss_alpha", 0.001},
               {"seq_aux", true},
               {"ep_size", 1},
               {"hidden_act", "silu"},
               {"max_position_embeddings", 262144},
               {"rms_norm_eps", 1e-5},
               {"rope_theta", 50000.0},
               {"rope_scaling",
                {{"type", "yarn"}, {"factor", 64.0}, {"original_max_position_embeddings", 4096}, {"mscale", 1.0},
                 {"mscale_all_dim", 1.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}}},
               {"attention_bias", false},
               {"attention_dropout", 0.0},
               {"tie_word_embeddings", false},
               {"bos_token_id", s.vocab - 4},
               {"eos_token_id", s.vocab - 3},
               {"pad_token_id", s.vocab - 1},
               {"dtype", "bfloat16"}};
}

// The Kimi-K2.5 wrapper (KimiK25ForConditionalGeneration). Special ids are
// moved into the small vocabulary: the last four ids play bos/eos/media/pad.
ojson kimi_wrapper(const DeepseekShape& s, ojson text, const ojson& top_quant) {
  ojson j{{"architectures", {"KimiK25ForConditionalGeneration"}},
          {"auto_map",
           {{"AutoConfig", "configuration_kimi_k25.KimiK25Config"},
            {"AutoModel", "modeling_kimi_k25.KimiK25ForConditionalGeneration"},
            {"AutoModelForCausalLM", "modeling_kimi_k25.KimiK25ForConditionalGeneration"}}},
          {"bos_token_id", s.vocab - 4},
          {"eos_token_id", s.vocab - 3},
          {"pad_token_id", s.vocab - 1},
          {"media_placeholder_token_id", s.vocab - 2},
          {"ignore_index", -100},
          {"model_type", "kimi_k25"},
          {"dtype", "bfloat16"},
          {"tie_word_embeddings", false},
          {"use_unified_vision_chunk", true},
          {"video_placeholder", "<|kimi_k25_video_placeholder|>"},
          {"text_config", std::move(text)},
          {"vision_config",
           {{"patch_size", 14}, {"init_pos_emb_height", 64}, {"init_pos_emb_width", 64}, {"init_pos_emb_time", 4},
            {"pos_emb_type", "divided_fixed"}, {"merge_kernel_size", {2, 2}}, {"merge_type", "sd2_tpool"},
            {"video_attn_type", "spatial_temporal"}, {"mm_projector_type", "patchmerger"}, {"mm_hidden_size", 1152},
            {"projector_hidden_act", "gelu"}, {"projector_ln_eps", 1e-5}, {"text_hidden_size", s.hidden},
            {"vt_hidden_size", 1152}, {"vt_intermediate_size", 4304}, {"vt_num_attention_heads", 16},
            {"vt_num_hidden_layers", 27}}}};
  if (!top_quant.is_null()) j["quantization_config"] = top_quant;
  return j;
}

ojson quark_fp4_spec(bool dynamic) {
  return ojson{{"dtype", "fp4"},           {"qscheme", "per_group"},        {"ch_axis", -1},
               {"group_size", 32},         {"is_dynamic", dynamic},         {"scale_format", "e8m0"},
               {"scale_type", "float"},    {"scale_calculation_mode", "even"}, {"round_method", "half_even"},
               {"symmetric", nullptr},     {"mx_element_dtype", nullptr},   {"observer_cls", "PerBlockMXObserver"},
               {"is_scale_quant", false}};
}

ojson quark_config(bool new_revision) {
  ojson exclude = new_revision
                      ? ojson{"re:.*\\.gate$", "re:.*self_attn.*", "lm_head", "re:.*embed_tokens",
                              "re:.*vision_tower.*", "re:.*mm_projector.*"}
                      : ojson{"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                              "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*vision_tower.*", "re:.*mm_projector.*"};
  return ojson{{"quant_method", "quark"},
               {"quant_mode", "eager_mode"},
               {"algo_config", nullptr},
               {"global_quant_config",
                {{"weight", quark_fp4_spec(false)}, {"input_tensors", quark_fp4_spec(true)}, {"output_tensors", nullptr},
                 {"bias", nullptr}, {"target_device", nullptr}}},
               {"layer_quant_config", ojson::object()},
               {"layer_type_quant_config", ojson::object()},
               {"kv_cache_quant_config", ojson::object()},
               {"softmax_quant_spec", nullptr},
               {"export",
                {{"kv_cache_group", ojson::array()}, {"min_kv_scale", 0.0}, {"pack_method", "reorder"},
                 {"weight_format", "real_quantized"}, {"weight_merge_groups", nullptr}}},
               {"exclude", exclude},
               {"version", "0.11"}};
}

ojson compressed_tensors_int4_config() {
  ojson weights{{"num_bits", 4},       {"type", "int"},          {"symmetric", true},  {"strategy", "group"},
                {"group_size", 32},    {"dynamic", false},       {"actorder", nullptr}, {"block_structure", nullptr},
                {"observer", "minmax"}, {"observer_kwargs", ojson::object()}};
  return ojson{{"quant_method", "compressed-tensors"},
               {"format", "pack-quantized"},
               {"quantization_status", "compressed"},
               {"config_groups",
                {{"group_0",
                  {{"targets", {"Linear"}}, {"input_activations", nullptr}, {"output_activations", nullptr},
                   {"weights", weights}}}}},
               {"ignore", {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}},
               {"kv_cache_scheme", nullptr}};
}

// ---- presets ---------------------------------------------------------------------

struct Checkpoint {
  ojson config;
  NamedTensors tensors;
};

Checkpoint kimi_mxfp4(uint64_t seed, bool new_revision) {
  DeepseekShape s;
  Builder b(seed);
  emit_deepseek(b, s, "language_model.", [&](const std::string& n) {
    if (contains(n, "self_attn") || n.ends_with("mlp.gate")) return WeightFormat::Dense;
    if (contains(n, "mlp.experts.")) return WeightFormat::Mxfp4;
    return new_revision ? WeightFormat::Mxfp4 : WeightFormat::Dense;  // shared experts, layer-0 MLP
  });
  emit_vision_dummies(b);
  ojson text = deepseek_text_config(s, "kimi_k2");
  text["quantization_config"] = quark_config(new_revision);
  ojson top_quant = text["quantization_config"];
  return {kimi_wrapper(s, std::move(text), top_quant), b.tensors()};
}

Checkpoint kimi_int4(uint64_t seed) {
  DeepseekShape s;
  Builder b(seed);
  emit_deepseek(b, s, "language_model.", [](const std::string& n) {
    return contains(n, "mlp.experts.") ? WeightFormat::Int4Group : WeightFormat::Dense;
  });
  emit_vision_dummies(b);
  ojson text = deepseek_text_config(s, "kimi_k2");
  text["quantization_config"] = compressed_tensors_int4_config();
  return {kimi_wrapper(s, std::move(text), nullptr), b.tensors()};
}

Checkpoint deepseek_fp8(uint64_t seed) {
  DeepseekShape s;
  s.n_group = 4;  // 2 experts per group, keep the 2 best groups
  s.topk_group = 2;
  s.intermediate = 384;
  Builder b(seed);
  emit_deepseek(b, s, "", [](const std::string& n) {
    return n.ends_with("mlp.gate") ? WeightFormat::Dense : WeightFormat::Fp8Block;
  });
  ojson c = deepseek_text_config(s, "deepseek_v3");
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = 10000.0;
  c["routed_scaling_factor"] = 2.5;
  c["max_position_embeddings"] = 163840;
  c["rope_scaling"]["factor"] = 40.0;
  c["bos_token_id"] = 0;
  c["eos_token_id"] = 1;
  c.erase("pad_token_id");
  c["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}}};
  return {c, b.tensors()};
}

Checkpoint llama(uint64_t seed) {
  const int64_t vocab = 1024, hidden = 256, layers = 2, heads = 8, kv_heads = 2, head_dim = 32, inter = 512;
  Builder b(seed);
  b.random_bf16("model.embed_tokens.weight", {vocab, hidden}, 0.0, synth::kEmbedStd);
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    b.norm(p + "input_layernorm.weight", hidden);
    b.norm(p + "post_attention_layernorm.weight", hidden);
    b.linear(p + "self_attn.q_proj", heads * head_dim, hidden, WeightFormat::Dense);
    b.linear(p + "self_attn.k_proj", kv_heads * head_dim, hidden, WeightFormat::Dense);
    b.linear(p + "self_attn.v_proj", kv_heads * head_dim, hidden, WeightFormat::Dense);
    b.linear(p + "self_attn.o_proj", hidden, heads * head_dim, WeightFormat::Dense);
    b.linear(p + "mlp.gate_proj", inter, hidden, WeightFormat::Dense);
    b.linear(p + "mlp.up_proj", inter, hidden, WeightFormat::Dense);
    b.linear(p + "mlp.down_proj", hidden, inter, WeightFormat::Dense);
  }
  b.norm("model.norm.weight", hidden);
  b.linear("lm_head", vocab, hidden, WeightFormat::Dense);
  ojson c{{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", vocab},
          {"hidden_size", hidden},
          {"intermediate_size", inter},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"head_dim", head_dim},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "bfloat16"}};
  return {c, b.tensors()};
}

Checkpoint build(const std::string& preset, uint64_t seed) {
  if (preset == "kimi-k25-mxfp4") return kimi_mxfp4(seed, true);
  if (preset == "kimi-k25-mxfp4-old") return kimi_mxfp4(seed, false);
  if (preset == "kimi-k25-int4") return kimi_int4(seed);
  if (preset == "deepseek-v3-fp8") return deepseek_fp8(seed);
  if (preset == "llama") return llama(seed);
  std::string known;
  for (const auto& p : synth_presets()) known += (known.empty() ? "" : ", ") + p.name;
  fail_input("unknown synth preset '{}' (known: {})", preset, known);
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = {
      {"kimi-k25-mxfp4", "Kimi-K2.5 Quark MXFP4, new exclude revision: routed + shared experts + layer-0 MLP in MXFP4"},
      {"kimi-k25-mxfp4-old", "Kimi-K2.5 Quark MXFP4, old exclude revision: only routed experts in MXFP4"},
      {"kimi-k25-int4", "Kimi-K2.5 compressed-tensors INT4 pack-quantized group 32 (routed experts)"},
      {"deepseek-v3-fp8", "DeepSeek-V3 FP8 e4m3 128x128 blocks, 4 expert groups (topk_group 2)"},
      {"llama", "Llama, BF16, GQA 8/2 heads, untied embeddings"},
  };
  return presets;
}

SynthResult write_synthetic_checkpoint(const std::filesystem::path& out_dir, const std::string& preset, uint64_t seed) {
  Checkpoint ckpt = build(preset, seed);
  std::filesystem::create_directories(out_dir);
  std::ofstream cfg(out_dir / "config.json");
  cfg << ckpt.config.dump(2) << "\n";
  if (!cfg) fail("error writing {}", (out_dir / "config.json").string());
  write_safetensors(out_dir / "model.safetensors", ckpt.tensors);
  SynthResult r;
  r.tensors = int64_t(ckpt.tensors.size());
  for (const auto& nt : ckpt.tensors) r.bytes += int64_t(nt.second.nbytes());
  return r;
}

}  // namespace mx
