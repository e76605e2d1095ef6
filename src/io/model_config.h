// What the engine needs from config.json, normalized across model families:
// llama, deepseek_v3, kimi_k2, and kimi_k25 (nested text_config, tensors under
// "language_model.", vision weights ignored).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx {

enum class Arch { Llama, DeepseekV3 };

struct RopeScaling {
  std::string type;  // "" (none), "yarn", "llama3", "linear"
  double factor = 1.0;
  double original_max_position_embeddings = 0;
  double beta_fast = 32, beta_slow = 1;  // DeepSeek defaults when absent
  double mscale = 1.0, mscale_all_dim = 0.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string model_type;        // as written in the file ("kimi_k25", "llama", ...)
  std::string tensor_prefix;     // "language_model." for Kimi-K2.5, "" otherwise
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  // head_dim: llama's per-head size (config or hidden/heads); DeepSeek: the
  // q/k size per head, qk_nope_head_dim + qk_rope_head_dim.
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  std::vector<int64_t> bos_token_ids, eos_token_ids;  // config may list several
  // DeepSeek-V3 / Kimi (MLA + MoE)
  int64_t q_lora_rank = 0, kv_lora_rank = 0;   // q_lora_rank 0 = no q compression
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t n_routed_experts = 0, num_experts_per_tok = 0, n_shared_experts = 0;
  int64_t moe_intermediate_size = 0, first_k_dense_replace = 0, moe_layer_freq = 1;
  int64_t n_group = 1, topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  std::string scoring_func = "sigmoid", topk_method = "noaux_tc";
  // Raw quantization_config (top level or inside text_config), null if none.
  nlohmann::json quantization_config;

  bool is_moe_layer(int64_t layer) const;
};

// Reads dir/config.json (or a config.json path). Throws mx::Error with the
// file path and key on missing or ill-typed fields and unsupported model types.
ModelConfig load_model_config(const std::filesystem::path& dir_or_file);
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& origin);

}  // namespace mx
