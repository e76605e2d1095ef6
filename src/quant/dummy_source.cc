#include "quant/dummy_source.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/thread_pool.h"
#include "quant/synth_values.h"
#include "quant/weight_loader.h"

namespace mx {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Counter-based randomness: value i of a tensor depends only on (seed, name,
// i), so tensors are filled in parallel chunks and any slice is reproducible.
uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Stream {
  uint64_t key;
  Stream(uint64_t seed, const std::string& name) : key(mix64(seed ^ fnv1a64(name))) {}
  uint64_t bits(int64_t i) const { return mix64(key + uint64_t(i) * 0x9e3779b97f4a7c15ull); }
  double uniform(int64_t i) const { return double(bits(i) >> 11) * 0x1.0p-53; }
  double normal(int64_t i) const {  // Box-Muller on two draws of its own
    double u1 = uniform(2 * i), u2 = uniform(2 * i + 1);
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
};

// RMS of uniformly drawn codes: E2M1 {0,.5,..,6} with sign; INT4 -8..7.
const double kE2m1Rms = std::sqrt(68.5 / 8.0);
const double kInt4Rms = std::sqrt(204.0 / 16.0);
// FP8 weights are e4m3(16 z), z ~ N(0,1): std 16, far below e4m3's 448.
constexpr double kFp8Spread = 16.0;

void parallel_fill(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::global().parallel_for(ceil_div(n, 65536), [&](int64_t b, int64_t e) {
    fn(b * 65536, std::min(n, e * 65536));
  });
}

}  // namespace

DummyTensorSource::DummyTensorSource(const ModelConfig& c, uint64_t seed)
    : prefix_(c.tensor_prefix), seed_(seed), spec_(parse_quant_spec(c.quantization_config, "config.json")) {
  auto need = [&](int64_t v, const char* key) {
    if (v <= 0) fail_input("--load-format dummy: config.json needs a positive '{}' to shape the weights ({})", key, c.model_type);
  };
  need(c.vocab_size, "vocab_size");
  need(c.hidden_size, "hidden_size");
  need(c.num_layers, "num_hidden_layers");
  need(c.num_heads, "num_attention_heads");
  if (spec_.method == QuantMethod::CompressedInt4 && spec_.group_size > 0) int4_group_ = spec_.group_size;
  if (c.arch == Arch::Llama) describe_llama(c);
  else describe_deepseek(c);
  add("model.embed_tokens.weight", Kind::Embedding, {c.vocab_size, c.hidden_size});
  add("model.norm.weight", Kind::Norm, {c.hidden_size});
  if (!c.tie_word_embeddings) add_linear("lm_head", c.vocab_size, c.hidden_size);
}

void DummyTensorSource::describe_llama(const ModelConfig& c) {
  const int64_t head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_heads;
  const int64_t kv_heads = c.num_kv_heads > 0 ? c.num_kv_heads : c.num_heads;
  if (c.intermediate_size <= 0) fail_input("--load-format dummy: config.json needs a positive 'intermediate_size'");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", Kind::Norm, {c.hidden_size});
    add(p + "post_attention_layernorm.weight", Kind::Norm, {c.hidden_size});
    add_linear(p + "self_attn.q_proj", c.num_heads * head_dim, c.hidden_size);
    add_linear(p + "self_attn.k_proj", kv_heads * head_dim, c.hidden_size);
    add_linear(p + "self_attn.v_proj", kv_heads * head_dim, c.hidden_size);
    add_linear(p + "self_attn.o_proj", c.hidden_size, c.num_heads * head_dim);
    add_linear(p + "mlp.gate_proj", c.intermediate_size, c.hidden_size);
    add_linear(p + "mlp.up_proj", c.intermediate_size, c.hidden_size);
    add_linear(p + "mlp.down_proj", c.hidden_size, c.intermediate_size);
  }
}

void DummyTensorSource::describe_deepseek(const ModelConfig& c) {
  const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim, H = c.hidden_size;
  auto mlp = [&](const std::string& p, int64_t inter) {
    add_linear(p + "gate_proj", inter, H);
    add_linear(p + "up_proj", inter, H);
    add_linear(p + "down_proj", H, inter);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", Kind::Norm, {H});
    add(p + "post_attention_layernorm.weight", Kind::Norm, {H});
    if (c.q_lora_rank > 0) {
      add_linear(p + "self_attn.q_a_proj", c.q_lora_rank, H);
      add(p + "self_attn.q_a_layernorm.weight", Kind::Norm, {c.q_lora_rank});
      add_linear(p + "self_attn.q_b_proj", c.num_heads * qk, c.q_lora_rank);
    } else {
      add_linear(p + "self_attn.q_proj", c.num_heads * qk, H);
    }
    add_linear(p + "self_attn.kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, H);
    add(p + "self_attn.kv_a_layernorm.weight", Kind::Norm, {c.kv_lora_rank});
    add_linear(p + "self_attn.kv_b_proj", c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    add_linear(p + "self_attn.o_proj", H, c.num_heads * c.v_head_dim);
    if (!c.is_moe_layer(l)) {
      if (c.intermediate_size <= 0) fail_input("--load-format dummy: config.json needs a positive 'intermediate_size' (dense layer {})", l);
      mlp(p + "mlp.", c.intermediate_size);
      continue;
    }
    add_linear(p + "mlp.gate", c.n_routed_experts, H);
    if (c.scoring_func == "sigmoid") add(p + "mlp.gate.e_score_correction_bias", Kind::CorrectionBias, {c.n_routed_experts});
    for (int64_t e = 0; e < c.n_routed_experts; ++e) mlp(p + "mlp.experts." + std::to_string(e) + ".", c.moe_intermediate_size);
    if (c.n_shared_experts > 0) mlp(p + "mlp.shared_experts.", c.moe_intermediate_size * c.n_shared_experts);
  }
}

WeightFormat DummyTensorSource::format_of(const std::string& full_name) const {
  if (full_name.ends_with(".mlp.gate")) return WeightFormat::Dense;  // routers are never quantized
  switch (spec_.method) {
    case QuantMethod::None: return WeightFormat::Dense;
    case QuantMethod::QuarkMxfp4: return spec_.is_excluded(full_name, prefix_) ? WeightFormat::Dense : WeightFormat::Mxfp4;
    case QuantMethod::CompressedInt4:
      return spec_.is_excluded(full_name, prefix_) ? WeightFormat::Dense : WeightFormat::Int4Group;
    case QuantMethod::Fp8Block:  // DeepSeek-V3's FP8 release keeps lm_head in BF16
      return full_name.ends_with("lm_head") ? WeightFormat::Dense : WeightFormat::Fp8Block;
  }
  return WeightFormat::Dense;
}

void DummyTensorSource::add_linear(const std::string& name, int64_t out, int64_t in) {
  const std::string full = prefix_ + name;
  const WeightFormat f = format_of(full);
  ++linears_[f];
  auto put = [&](const std::string& suffix, Kind kind, Shape shape, int64_t group = 0) {
    entries_[full + suffix] = {kind, std::move(shape), in, group};
  };
  switch (f) {
    case WeightFormat::Dense: put(".weight", Kind::Dense, {out, in}); break;
    case WeightFormat::Mxfp4:
      if (in % 32 != 0) fail_input("--load-format dummy: {} is MXFP4 but its input size {} is not a multiple of 32", full, in);
      put(".weight", Kind::Mxfp4, {out, in / 2});
      put(".weight_scale", Kind::Mxfp4Scale, {out, in / 32});
      break;
    case WeightFormat::Fp8Block:
      put(".weight", Kind::Fp8, {out, in});
      put(".weight_scale_inv", Kind::Fp8Scale, {ceil_div(out, 128), ceil_div(in, 128)});
      break;
    case WeightFormat::Int4Group:
      if (in % int4_group_ != 0 || in % 8 != 0)
        fail_input("--load-format dummy: {} is INT4 (group {}) but its input size {} does not split into groups", full,
                   int4_group_, in);
      put(".weight_packed", Kind::Int4, {out, in / 8}, int4_group_);
      put(".weight_scale", Kind::Int4Scale, {out, in / int4_group_}, int4_group_);
      put(".weight_shape", Kind::Int4Shape, {2});
      entries_[full + ".weight_shape"].group = out;  // the shape tensor's values: [out, in]
      break;
  }
}

std::vector<std::string> DummyTensorSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

std::string DummyTensorSource::file_of(const std::string&) const { return fmt::format("dummy weights (seed {})", seed_); }

std::string DummyTensorSource::summary() const {
  std::string out = fmt::format("dummy weights (seed {})", seed_);
  int64_t linear_tensors = 0;
  for (const auto& [format, n] : linears_) out += fmt::format("; {}: {} linears", weight_format_name(format), n);
  for (const auto& [name, e] : entries_)
    linear_tensors += e.kind != Kind::Norm && e.kind != Kind::Embedding && e.kind != Kind::CorrectionBias;
  return out + fmt::format("; other tensors: {}", int64_t(entries_.size()) - linear_tensors);
}

const DummyTensorSource::Entry& DummyTensorSource::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("dummy weights: the model asked for '{}', which the config does not describe", name);
  return it->second;
}

DType DummyTensorSource::dtype_of(Kind kind) {
  switch (kind) {
    case Kind::Norm:
    case Kind::Embedding:
    case Kind::Dense:
    case Kind::Int4Scale: return DType::BF16;
    case Kind::CorrectionBias:
    case Kind::Fp8Scale: return DType::F32;
    case Kind::Mxfp4:
    case Kind::Mxfp4Scale: return DType::U8;
    case Kind::Int4:
    case Kind::Int4Shape: return DType::I32;
    case Kind::Fp8: return DType::F8E4M3;
  }
  fail("dummy weights: unknown kind");
}

// Elements [first, first + count) of the tensor in its flat (row-major) order,
// written to out. Every value is a function of (seed, name, flat index) only,
// so any slice equals the same slice of the whole tensor.
void DummyTensorSource::fill(const std::string& name, const Entry& e, int64_t first, int64_t count,
                             uint8_t* out) const {
  const Stream rng(seed_, name);
  const double stddev = e.in_features > 0 ? synth::weight_stddev(e.in_features) : 0.0;
  auto each = [&](auto* p, auto value) {
    for (int64_t i = 0; i < count; ++i) p[i] = value(first + i);
  };
  switch (e.kind) {
    case Kind::Norm:
      return each(reinterpret_cast<uint16_t*>(out),
                  [&](int64_t i) { return f32_to_bf16(float(synth::kNormMean + synth::kNormStd * rng.normal(i))); });
    case Kind::Embedding:
      return each(reinterpret_cast<uint16_t*>(out),
                  [&](int64_t i) { return f32_to_bf16(float(synth::kEmbedStd * rng.normal(i))); });
    case Kind::CorrectionBias:
      return each(reinterpret_cast<float*>(out),
                  [&](int64_t i) { return round_bf16(float(synth::kCorrectionBiasStd * rng.normal(i))); });
    case Kind::Dense: {  // std * block factor, factor per 32 consecutive values
      const Stream factors(seed_, name + "#factor");
      return each(reinterpret_cast<uint16_t*>(out), [&](int64_t i) {
        return f32_to_bf16(float(rng.normal(i) * stddev * synth::block_factor(factors.uniform(i / synth::kFactorBlock))));
      });
    }
    case Kind::Mxfp4:
    case Kind::Int4: {  // uniformly random codes, byte b from draw b / 8
      const int64_t unit = int64_t(dtype_size(dtype_of(e.kind)));
      const int64_t begin = first * unit, end = (first + count) * unit;
      for (int64_t b = begin; b < end;) {
        const uint64_t v = rng.bits(b / 8);
        for (int64_t k = b % 8; k < 8 && b < end; ++k, ++b) out[b - begin] = uint8_t(v >> (8 * k));
      }
      return;
    }
    case Kind::Mxfp4Scale:  // 2^round(log2(std * factor / rms(codes))) as E8M0
      return each(out, [&](int64_t i) {
        const int ex = int(std::lround(std::log2(stddev * synth::block_factor(rng.uniform(i)) / kE2m1Rms)));
        return uint8_t(std::clamp(ex + 127, 1, 254));
      });
    case Kind::Int4Scale:
      return each(reinterpret_cast<uint16_t*>(out), [&](int64_t i) {
        return f32_to_bf16(float(stddev * synth::block_factor(rng.uniform(i)) / kInt4Rms));
      });
    case Kind::Int4Shape:  // the shape tensor's values: [out, in]
      return each(reinterpret_cast<int32_t*>(out),
                  [&](int64_t i) { return int32_t(i == 0 ? e.group : e.in_features); });
    case Kind::Fp8:
      return each(out, [&](int64_t i) { return f32_to_fp8e4m3(float(kFp8Spread * rng.normal(i))); });
    case Kind::Fp8Scale:
      return each(reinterpret_cast<float*>(out), [&](int64_t i) {
        return float(stddev * synth::block_factor(rng.uniform(i)) / kFp8Spread);
      });
  }
  fail("dummy weights: unknown kind for '{}'", name);
}

Tensor DummyTensorSource::get(const std::string& name) const {
  const Entry& e = entry(name);
  Tensor t = Tensor::empty(dtype_of(e.kind), e.shape);
  const int64_t n = shape_numel(e.shape);
  const size_t elem = dtype_size(t.dtype());
  // Chunks of 65,536 values in parallel; a multiple of 8 bytes, so no code
  // draw is split between chunks (each would still be right, only made twice).
  parallel_fill(n, [&](int64_t b, int64_t end) { fill(name, e, b, end - b, t.raw() + size_t(b) * elem); });
  return t;
}

Tensor DummyTensorSource::get_rows(const std::string& name, int64_t begin, int64_t end) const {
  const Entry& e = entry(name);
  if (e.shape.empty() || begin < 0 || begin > end || end > e.shape[0])
    fail_input("dummy weights: rows [{}, {}) of '{}' {} are out of range", begin, end, name, shape_str(e.shape));
  Shape shape = e.shape;
  shape[0] = end - begin;
  Tensor t = Tensor::empty(dtype_of(e.kind), shape);
  const int64_t per_row = e.shape[0] ? shape_numel(e.shape) / e.shape[0] : 0, first = begin * per_row;
  const size_t elem = dtype_size(t.dtype());
  parallel_fill(shape_numel(shape), [&](int64_t b, int64_t en) {
    fill(name, e, first + b, en - b, t.raw() + size_t(b) * elem);
  });
  return t;
}

Tensor DummyTensorSource::get_cols(const std::string& name, int64_t begin, int64_t end) const {
  const Entry& e = entry(name);
  if (e.shape.size() != 2 || begin < 0 || begin > end || end > e.shape[1])
    fail_input("dummy weights: columns [{}, {}) of '{}' {} are out of range (2-D tensors only)", begin, end, name,
               shape_str(e.shape));
  const int64_t rows = e.shape[0], cols = e.shape[1], width = end - begin;
  Tensor t = Tensor::empty(dtype_of(e.kind), {rows, width});
  const size_t elem = dtype_size(t.dtype());
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fill(name, e, r * cols + begin, width, t.raw() + size_t(r * width) * elem);
  });
  return t;
}

}  // namespace mx
