// config.json -> ModelConfig. Each family's keys are read by its own function;
// the small typed getters below turn a missing or ill-typed key into an error
// that names the file and the key.
#include "io/model_config.h"

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/log.h"

namespace mx {

namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t integer(const char* key) const {
    if (!has(key)) fail_input("{}: missing required key '{}'", where_, key);
    return as_integer(key);
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? as_integer(key) : fallback; }

  double number(const char* key) const {
    if (!has(key)) fail_input("{}: missing required key '{}'", where_, key);
    return as_number(key);
  }
  double number(const char* key, double fallback) const { return has(key) ? as_number(key) : fallback; }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail_input("{}: '{}' must be true or false, got {}", where_, key, j_[key].dump());
    return j_[key].get<bool>();
  }

  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail_input("{}: '{}' must be a string, got {}", where_, key, j_[key].dump());
    return j_[key].get<std::string>();
  }

  // An id or a list of ids (eos_token_id may be either); null/absent -> {}.
  std::vector<int64_t> ids(const char* key) const {
    if (!has(key)) return {};
    const json& v = j_[key];
    if (v.is_number_integer()) return {v.get<int64_t>()};
    if (!v.is_array()) fail_input("{}: '{}' must be an integer or a list of integers, got {}", where_, key, v.dump());
    std::vector<int64_t> out;
    for (const auto& x : v) {
      if (!x.is_number_integer()) fail_input("{}: '{}' holds a non-integer {}", where_, key, x.dump());
      out.push_back(x.get<int64_t>());
    }
    return out;
  }

  const json& raw() const { return j_; }
  const std::string& where() const { return where_; }

 private:
  int64_t as_integer(const char* key) const {
    const json& v = j_[key];
    // Some exporters write integers as 4096.0; accept integral floats.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) return int64_t(v.get<double>());
    if (!v.is_number_integer()) fail_input("{}: '{}' must be an integer, got {}", where_, key, v.dump());
    return v.get<int64_t>();
  }
  double as_number(const char* key) const {
    if (!j_[key].is_number()) fail_input("{}: '{}' must be a number, got {}", where_, key, j_[key].dump());
    return j_[key].get<double>();
  }

  const json& j_;
  std::string where_;
};

void require_positive(const Reader& r, const char* key, int64_t v) {
  if (v <= 0) fail_input("{}: '{}' must be positive, got {}", r.where(), key, v);
}

RopeScaling parse_rope_scaling(const json& j, const std::string& where) {
  RopeScaling rs;
  if (j.is_null()) return rs;
  if (!j.is_object()) fail_input("{}: 'rope_scaling' must be an object or null", where);
  Reader r(j, where + ": rope_scaling");
  rs.type = r.string("type", r.string("rope_type", ""));
  if (rs.type == "default") rs.type = "";
  if (rs.type.empty()) return rs;
  if (rs.type != "yarn" && rs.type != "llama3" && rs.type != "linear")
    fail_input("{}: unsupported rope_scaling type '{}' (supported: yarn, llama3, linear)", r.where(), rs.type);
  rs.factor = r.number("factor");
  rs.original_max_position_embeddings = r.number("original_max_position_embeddings", 0);
  if (rs.type == "yarn") {
    // DeepSeek-V3's defaults; some Kimi-K2.5 config copies leave them out.
    rs.beta_fast = r.number("beta_fast", 32);
    rs.beta_slow = r.number("beta_slow", 1);
    rs.mscale = r.number("mscale", 1.0);
    rs.mscale_all_dim = r.number("mscale_all_dim", 0.0);
  } else if (rs.type == "llama3") {
    rs.low_freq_factor = r.number("low_freq_factor", 1.0);
    rs.high_freq_factor = r.number("high_freq_factor", 4.0);
  }
  return rs;
}

// Fields every family shares.
void parse_common(const Reader& r, ModelConfig& c) {
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_layers = r.integer("num_hidden_layers");
  c.num_heads = r.integer("num_attention_heads");
  c.num_kv_heads = r.integer("num_key_value_heads", c.num_heads);
  c.intermediate_size = r.integer("intermediate_size");
  c.max_position_embeddings = r.integer("max_position_embeddings", 0);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.bos_token_ids = r.ids("bos_token_id");
  c.eos_token_ids = r.ids("eos_token_id");
  // transformers >= 5 writes rope_parameters {rope_theta, rope_type, ...}.
  const json& params = r.has("rope_parameters") ? r.raw()["rope_parameters"] : json();
  double theta = params.is_object() && params.contains("rope_theta") && params["rope_theta"].is_number()
                     ? params["rope_theta"].get<double>() : 10000.0;
  c.rope_theta = r.number("rope_theta", theta);
  c.rope_scaling = parse_rope_scaling(r.has("rope_scaling") ? r.raw()["rope_scaling"] : params, r.where());
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.num_kv_heads}, {"intermediate_size", c.intermediate_size}})
    require_positive(r, key, v);
}

void parse_llama(const Reader& r, ModelConfig& c) {
  c.arch = Arch::Llama;
  parse_common(r, c);
  c.head_dim = r.integer("head_dim", c.hidden_size / c.num_heads);
  if (!r.has("head_dim") && c.hidden_size % c.num_heads != 0)
    fail_input("{}: hidden_size {} is not divisible by num_attention_heads {}", r.where(), c.hidden_size, c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    fail_input("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", r.where(), c.num_heads,
               c.num_kv_heads);
  c.n_routed_experts = 0;
}

void parse_deepseek(const Reader& r, ModelConfig& c) {
  c.arch = Arch::DeepseekV3;
  parse_common(r, c);
  c.q_lora_rank = r.integer("q_lora_rank", 0);  // null in DeepSeek-V2-Lite: no q compression
  c.kv_lora_rank = r.integer("kv_lora_rank");
  c.qk_nope_head_dim = r.integer("qk_nope_head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.v_head_dim = r.integer("v_head_dim");
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  c.n_routed_experts = r.integer("n_routed_experts", 0);
  c.num_experts_per_tok = r.integer("num_experts_per_tok", 0);
  c.n_shared_experts = r.integer("n_shared_experts", 0);
  c.moe_intermediate_size = r.integer("moe_intermediate_size", 0);
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 0);
  c.moe_layer_freq = r.integer("moe_layer_freq", 1);
  c.n_group = r.integer("n_group", 1);
  c.topk_group = r.integer("topk_group", 1);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.0);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.scoring_func = r.string("scoring_func", "sigmoid");
  c.topk_method = r.string("topk_method", "noaux_tc");
  for (auto [key, v] : {std::pair{"kv_lora_rank", c.kv_lora_rank}, {"qk_nope_head_dim", c.qk_nope_head_dim},
                        {"qk_rope_head_dim", c.qk_rope_head_dim}, {"v_head_dim", c.v_head_dim},
                        {"moe_layer_freq", c.moe_layer_freq}, {"n_group", c.n_group}})
    require_positive(r, key, v);
  if (c.n_routed_experts > 0) {
    require_positive(r, "num_experts_per_tok", c.num_experts_per_tok);
    require_positive(r, "moe_intermediate_size", c.moe_intermediate_size);
    if (c.n_routed_experts % c.n_group != 0)
      fail_input("{}: n_routed_experts {} is not divisible by n_group {}", r.where(), c.n_routed_experts, c.n_group);
    if (c.topk_group < 1 || c.topk_group > c.n_group)
      fail_input("{}: topk_group {} must be in [1, n_group {}]", r.where(), c.topk_group, c.n_group);
    if (c.num_experts_per_tok > c.n_routed_experts)
      fail_input("{}: num_experts_per_tok {} exceeds n_routed_experts {}", r.where(), c.num_experts_per_tok,
                 c.n_routed_experts);
  }
}

bool is_deepseek_type(const std::string& t) { return t == "deepseek_v3" || t == "kimi_k2"; }

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

ModelConfig parse_model_config(const json& j, const std::string& origin) {
  if (!j.is_object()) fail_input("{}: config is not a JSON object", origin);
  Reader top(j, origin);
  ModelConfig c;
  c.model_type = top.string("model_type", "");
  if (c.model_type.empty()) fail_input("{}: missing required key 'model_type'", origin);
  if (c.model_type == "llama") {
    parse_llama(top, c);
  } else if (is_deepseek_type(c.model_type)) {
    parse_deepseek(top, c);
  } else if (c.model_type == "kimi_k25") {
    // A vision-language wrapper: the text model sits in text_config and its
    // tensors under "language_model."; vision_tower/mm_projector are unused.
    if (!top.has("text_config") || !j["text_config"].is_object())
      fail_input("{}: model_type kimi_k25 needs a 'text_config' object", origin);
    Reader text(j["text_config"], origin + ": text_config");
    std::string inner = text.string("model_type", "kimi_k2");
    if (!is_deepseek_type(inner))
      fail_input("{}: unsupported text_config.model_type '{}' (expected kimi_k2 or deepseek_v3)", origin, inner);
    parse_deepseek(text, c);
    c.tensor_prefix = "language_model.";
    // The wrapper's ids are the ones generation uses; text_config's are a fallback.
    if (top.has("bos_token_id")) c.bos_token_ids = top.ids("bos_token_id");
    if (top.has("eos_token_id")) c.eos_token_ids = top.ids("eos_token_id");
  } else {
    fail_input("{}: unsupported model_type '{}' (supported: llama, deepseek_v3, kimi_k2, kimi_k25)", origin,
               c.model_type);
  }
  const json* text = c.tensor_prefix.empty() ? nullptr : &j["text_config"];
  c.tie_word_embeddings = text && text->contains("tie_word_embeddings")
                              ? Reader(*text, origin + ": text_config").boolean("tie_word_embeddings", false)
                              : top.boolean("tie_word_embeddings", false);
  // vLLM copies text_config's quantization_config to the top; accept either.
  const json* qc_text = text && text->contains("quantization_config") ? &(*text)["quantization_config"] : nullptr;
  const json* qc_top = j.contains("quantization_config") ? &j["quantization_config"] : nullptr;
  if (qc_text && qc_top && !qc_top->is_null() && *qc_text != *qc_top)
    log::warn("{}: quantization_config differs between top level and text_config; using text_config's", origin);
  const json* qc = qc_text && !qc_text->is_null() ? qc_text : qc_top;
  if (qc && !qc->is_null()) {
    if (!qc->is_object()) fail_input("{}: 'quantization_config' must be an object", origin);
    c.quantization_config = *qc;
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& dir_or_file) {
  std::filesystem::path path = std::filesystem::is_directory(dir_or_file) ? dir_or_file / "config.json" : dir_or_file;
  std::ifstream in(path);
  if (!in) fail_input("cannot open model config {}", path.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail_input("{} is not valid JSON", path.string());
  return parse_model_config(j, path.string());
}

}  // namespace mx
