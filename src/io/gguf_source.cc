#include "io/gguf_source.h"

#include <cstring>
#include <map>
#include <optional>
#include <regex>

#include "core/error.h"
#include "io/gguf_quants.h"

namespace mx {
namespace {

const std::map<std::string, std::string>& block_names() {
  static const std::map<std::string, std::string> m = {
      {"attn_norm", "input_layernorm"},       {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},         {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},         {"attn_output", "self_attn.o_proj"},
      {"ffn_gate", "mlp.gate_proj"},          {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  return m;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rows of one head are stored interleaved (row 2i+j = HF row j*D/2+i); undo it.
Tensor unpermute_rows(const Tensor& t, int64_t n_heads, const std::string& name) {
  int64_t rows = t.dim(0);
  if (n_heads <= 0 || rows % n_heads != 0 || (rows / n_heads) % 2 != 0)
    fail_input("GGUF tensor {}: {} rows do not split into {} heads of even size", name, rows, n_heads);
  int64_t head = rows / n_heads, half = head / 2;
  size_t row_bytes = t.nbytes() / size_t(rows);
  Tensor out = Tensor::empty(t.dtype(), t.shape());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t src = h * head + 2 * i + j, dst = h * head + j * half + i;
        std::memcpy(out.raw() + size_t(dst) * row_bytes, t.raw() + size_t(src) * row_bytes, row_bytes);
      }
  return out;
}

// The same mapped bytes seen with their element type and row-major shape.
Tensor view_as(const Tensor& bytes, DType dtype, Shape shape) {
  return Tensor(bytes.storage(), bytes.offset(), dtype, std::move(shape));
}

class GgufSource : public TensorSource {
 public:
  explicit GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    n_heads_ = file_->get_int_or("llama.attention.head_count", 0);
    n_kv_heads_ = file_->get_int_or("llama.attention.head_count_kv", n_heads_);
    for (const auto& info : file_->tensors()) {
      std::string hf = hf_name_from_gguf(info.name);
      if (hf.empty()) hf = info.name;
      by_hf_name_.emplace(hf, &info);
      names_.push_back(hf);
      if (info.type == uint32_t(GgmlType::MXFP4) && ends_with(hf, ".weight")) {
        if (info.ne.size() != 2) fail_input("{}: MXFP4 tensor '{}' must be 2-D", file_->path().string(), info.name);
        scale_of_.emplace(hf + "_scale", &info);
        names_.push_back(hf + "_scale");
      }
    }
  }

  bool has(const std::string& name) const override { return by_hf_name_.count(name) || scale_of_.count(name); }

  std::vector<std::string> names() const override { return names_; }

  std::string file_of(const std::string& name) const override {
    const GgufTensorInfo* info = lookup(name);
    return fmt::format("{} (tensor {})", file_->path().string(), info ? info->name : "?");
  }

  Tensor get(const std::string& name) const override {
    if (auto it = scale_of_.find(name); it != scale_of_.end()) return permuted(mxfp4(*it->second).second, *it->second);
    const GgufTensorInfo* info = lookup(name);
    if (!info) fail_input("tensor '{}' is not in GGUF file {}", name, file_->path().string());
    return permuted(convert(*info), *info);
  }

 private:
  const GgufTensorInfo* lookup(const std::string& name) const {
    if (auto it = by_hf_name_.find(name); it != by_hf_name_.end()) return it->second;
    if (auto it = scale_of_.find(name); it != scale_of_.end()) return it->second;
    return nullptr;
  }

  Tensor convert(const GgufTensorInfo& info) const {
    Shape shape = info.shape();
    switch (GgmlType(info.type)) {
      case GgmlType::F32: return view_as(file_->raw_bytes(info), DType::F32, shape);
      case GgmlType::F16: return view_as(file_->raw_bytes(info), DType::F16, shape);
      case GgmlType::BF16: return view_as(file_->raw_bytes(info), DType::BF16, shape);
      case GgmlType::MXFP4: return mxfp4(info).first;
      default: break;
    }
    Tensor out = Tensor::empty(DType::BF16, shape);
    gguf::dequantize_to_bf16(info.type, file_->data(info), out.numel(), out.data<uint16_t>());
    return out;
  }

  std::pair<Tensor, Tensor> mxfp4(const GgufTensorInfo& info) const {
    int64_t in = info.ne[0], out_rows = info.ne[1];
    Tensor w = Tensor::empty(DType::U8, {out_rows, in / 2});
    Tensor s = Tensor::empty(DType::U8, {out_rows, in / 32});
    gguf::mxfp4_to_engine(file_->data(info), in * out_rows, w.data<uint8_t>(), s.data<uint8_t>());
    return {w, s};
  }

  // attn_q / attn_k rows back to the HF order (see the header).
  Tensor permuted(const Tensor& t, const GgufTensorInfo& info) const {
    bool is_q = info.name.find(".attn_q.") != std::string::npos;
    bool is_k = info.name.find(".attn_k.") != std::string::npos;
    if (!is_q && !is_k) return t;
    return unpermute_rows(t, is_q ? n_heads_ : n_kv_heads_, info.name);
  }

  std::shared_ptr<const GgufFile> file_;
  int64_t n_heads_ = 0, n_kv_heads_ = 0;
  std::map<std::string, const GgufTensorInfo*> by_hf_name_;
  std::map<std::string, const GgufTensorInfo*> scale_of_;
  std::vector<std::string> names_;
};

}  // namespace

std::string hf_name_from_gguf(const std::string& gguf_name) {
  static const std::regex kBlock(R"(blk\.(\d+)\.([a-z_]+)\.(weight|bias))");
  static const std::map<std::string, std::string> kTop = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  if (auto it = kTop.find(gguf_name); it != kTop.end()) return it->second;
  std::smatch m;
  if (!std::regex_match(gguf_name, m, kBlock)) return "";
  auto it = block_names().find(m[2].str());
  if (it == block_names().end()) return "";
  return fmt::format("model.layers.{}.{}.{}", m[1].str(), it->second, m[3].str());
}

std::unique_ptr<TensorSource> open_gguf(std::shared_ptr<const GgufFile> file) {
  return std::make_unique<GgufSource>(std::move(file));
}

std::unique_ptr<TensorSource> open_gguf(const std::filesystem::path& file) { return open_gguf(GgufFile::open(file)); }

ModelConfig gguf_model_config(const GgufFile& f) {
  std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    fail_input("{}: GGUF architecture '{}' is not supported (only 'llama')", f.path().string(), arch);
  auto key = [](const char* k) { return fmt::format("llama.{}", k); };
  ModelConfig c;
  c.arch = Arch::Llama;
  c.model_type = "llama";
  c.hidden_size = f.get_int(key("embedding_length"));
  c.num_layers = f.get_int(key("block_count"));
  c.num_heads = f.get_int(key("attention.head_count"));
  c.num_kv_heads = f.get_int_or(key("attention.head_count_kv"), c.num_heads);
  c.intermediate_size = f.get_int(key("feed_forward_length"));
  c.max_position_embeddings = f.get_int_or(key("context_length"), 2048);
  c.rms_norm_eps = f.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5);
  c.rope_theta = f.get_float_or(key("rope.freq_base"), 10000.0);
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
      c.num_heads % c.num_kv_heads != 0 || c.hidden_size % c.num_heads != 0)
    fail_input("{}: inconsistent llama shape: hidden {} layers {} heads {} kv heads {}", f.path().string(),
               c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads);
  c.head_dim = f.get_int_or(key("attention.key_length"), c.hidden_size / c.num_heads);
  if (f.find("tokenizer.ggml.tokens"))
    c.vocab_size = f.get_int_or(key("vocab_size"), int64_t(f.find("tokenizer.ggml.tokens")->value.size()));
  else
    c.vocab_size = f.get_int(key("vocab_size"));
  std::string scaling = f.get_string_or(key("rope.scaling.type"), "");
  if (!scaling.empty() && scaling != "none") {
    c.rope_scaling.type = scaling;
    c.rope_scaling.factor = f.get_float_or(key("rope.scaling.factor"), 1.0);
    c.rope_scaling.original_max_position_embeddings = double(f.get_int_or(key("rope.scaling.original_context_length"), 0));
  }
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  if (f.find("tokenizer.ggml.bos_token_id")) c.bos_token_ids = {f.get_int("tokenizer.ggml.bos_token_id")};
  if (f.find("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {f.get_int("tokenizer.ggml.eos_token_id")};
  for (const auto& t : f.tensors())
    if (t.type == uint32_t(GgmlType::MXFP4)) {
      c.quantization_config = quark_mxfp4_quantization_config({}, false);
      break;
    }
  return c;
}

ModelConfig load_gguf_model_config(const std::filesystem::path& file) { return gguf_model_config(*GgufFile::open(file)); }

nlohmann::json quark_mxfp4_quantization_config(const std::vector<std::string>& exclude, bool activations_mxfp4) {
  nlohmann::json weight = {
      {"dtype", "fp4"},           {"qscheme", "per_group"},
      {"ch_axis", -1},            {"group_size", 32},
      {"is_dynamic", false},      {"scale_format", "e8m0"},
      {"scale_type", "float"},    {"scale_calculation_mode", "even"},
      {"round_method", "half_even"}, {"symmetric", nullptr},
      {"mx_element_dtype", nullptr}, {"observer_cls", "PerBlockMXObserver"},
      {"is_scale_quant", false},
  };
  nlohmann::json inputs = nullptr;
  if (activations_mxfp4) {
    inputs = weight;
    inputs["is_dynamic"] = true;
  }
  return {
      {"quant_method", "quark"},
      {"quant_mode", "eager_mode"},
      {"algo_config", nullptr},
      {"global_quant_config",
       {{"weight", weight}, {"input_tensors", inputs}, {"output_tensors", nullptr}, {"bias", nullptr},
        {"target_device", nullptr}}},
      {"layer_quant_config", nlohmann::json::object()},
      {"layer_type_quant_config", nlohmann::json::object()},
      {"kv_cache_quant_config", nlohmann::json::object()},
      {"softmax_quant_spec", nullptr},
      {"export",
       {{"kv_cache_group", nlohmann::json::array()}, {"min_kv_scale", 0.0}, {"pack_method", "reorder"},
        {"weight_format", "real_quantized"}, {"weight_merge_groups", nullptr}}},
      {"exclude", exclude},
      {"version", "0.11"},
  };
}

}  // namespace mx
