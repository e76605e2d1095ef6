// Per-tensor format decisions. The file is the authority (what the tensors
// are); quantization_config is a cross-check: a format of another method is
// an error, a disagreement with the exclude list only a warning, because the
// published exclude lists are known to be incomplete.
#include "quant/weight_loader.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace mx {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The same bytes seen as U8 (E8M0 scales and F4 weights are byte arrays).
Tensor as_u8(const Tensor& t) { return Tensor(t.storage(), t.offset(), DType::U8, t.shape()); }

bool is_float(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

// Vision weights of a VLM wrapper are never loaded by the text model.
bool is_vision(const std::string& name) {
  return name.starts_with("vision_tower.") || name.starts_with("mm_projector.") ||
         name.find(".vision_tower.") != std::string::npos || name.find(".mm_projector.") != std::string::npos;
}

// The MoE router is never quantized by the runtimes these checkpoints target
// (vLLM builds it without a quant config), whatever the exclude list says.
bool is_router(const std::string& name) { return name.ends_with(".mlp.gate"); }

struct Loader {
  const TensorSource& src;
  LinearWeight& w;

  [[noreturn]] void bad(const std::string& tensor, const std::string& what) const {
    fail_input("{}: tensor '{}': {}", src.file_of(tensor), tensor, what);
  }
  Tensor need(const std::string& tensor, const char* why) const {
    if (!src.has(tensor)) bad(tensor, fmt::format("missing ({})", why));
    return src.get(tensor);
  }
  void expect(const Tensor& t, const std::string& tensor, const Shape& want) const {
    if (t.shape() != want) bad(tensor, fmt::format("shape {} but {} expects {}", shape_str(t.shape()), w.name, shape_str(want)));
  }

  void mxfp4(const Tensor& weight) {
    std::string sname = w.name + ".weight_scale";
    Tensor scale = need(sname, "an MXFP4 weight needs its E8M0 scales");
    if (scale.dtype() != DType::U8 && scale.dtype() != DType::E8M0)
      bad(sname, fmt::format("dtype {} but MXFP4 scales are uint8 E8M0", dtype_name(scale.dtype())));
    w.format = WeightFormat::Mxfp4;
    w.group_size = 32;
    w.out_features = weight.dim(0);
    w.in_features = weight.dim(1) * 2;
    if (w.in_features % 32 != 0) bad(w.name + ".weight", fmt::format("in_features {} not divisible by 32", w.in_features));
    expect(scale, sname, {w.out_features, w.in_features / 32});
    w.weight = as_u8(weight);
    w.scale = as_u8(scale);
  }

  void fp8(const Tensor& weight) {
    std::string sname = w.name + ".weight_scale_inv";
    if (!src.has(sname) && src.has(w.name + ".weight_scale"))
      bad(w.name + ".weight_scale", "per-tensor/per-channel FP8 (weight_scale) is not supported; only 128x128 "
                                    "blocks with weight_scale_inv");
    Tensor scale = need(sname, "an FP8 weight needs its block scales");
    if (!is_float(scale.dtype())) bad(sname, fmt::format("dtype {} is not a float", dtype_name(scale.dtype())));
    w.format = WeightFormat::Fp8Block;
    w.group_size = 128;
    w.out_features = weight.dim(0);
    w.in_features = weight.dim(1);
    expect(scale, sname, {ceil_div(w.out_features, 128), ceil_div(w.in_features, 128)});
    w.weight = weight;
    w.scale = scale.dtype() == DType::F32 ? scale : scale.to(DType::F32);
  }

  void int4(int64_t spec_group) {
    std::string pname = w.name + ".weight_packed", sname = w.name + ".weight_scale";
    Tensor packed = src.get(pname);
    if (packed.dtype() != DType::I32 || packed.ndim() != 2) bad(pname, fmt::format("{} but INT4 packs into i32 [out, in/8]", packed.describe()));
    Tensor scale = need(sname, "an INT4 weight needs its group scales");
    if (!is_float(scale.dtype()) || scale.ndim() != 2 || scale.dim(1) == 0)
      bad(sname, fmt::format("{} is not a 2-D float scale", scale.describe()));
    w.format = WeightFormat::Int4Group;
    w.out_features = packed.dim(0);
    w.in_features = packed.dim(1) * 8;
    check_weight_shape();
    if (w.in_features % scale.dim(1) != 0)
      bad(sname, fmt::format("{} groups do not divide in_features {}", scale.dim(1), w.in_features));
    w.group_size = w.in_features / scale.dim(1);
    if (spec_group && w.group_size != spec_group)
      bad(sname, fmt::format("implies group size {} but quantization_config says {}", w.group_size, spec_group));
    expect(scale, sname, {w.out_features, w.in_features / w.group_size});
    w.weight = packed;
    w.scale = scale;
  }

  // compressed-tensors records the unpadded [out, in]; padding is not supported.
  void check_weight_shape() const {
    std::string name = w.name + ".weight_shape";
    if (!src.has(name)) return;
    Tensor s = src.get(name);
    if (s.numel() != 2 || (s.dtype() != DType::I32 && s.dtype() != DType::I64)) bad(name, "expected 2 integers [out, in]");
    int64_t out = int64_t(s.get_f32(0)), in = int64_t(s.get_f32(1));
    if (out != w.out_features || in != w.in_features)
      bad(name, fmt::format("says [{}, {}] but weight_packed holds [{}, {}] (padded packing is not supported)", out, in,
                            w.out_features, w.in_features));
  }

  void dense(const Tensor& weight) {
    w.format = WeightFormat::Dense;
    w.out_features = weight.dim(0);
    w.in_features = weight.dim(1);
    w.weight = weight;
  }
};

}  // namespace

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Dense: return "bf16";
    case WeightFormat::Fp8Block: return "fp8-block";
    case WeightFormat::Mxfp4: return "mxfp4";
    case WeightFormat::Int4Group: return "int4-group";
  }
  return "?";
}

WeightLoader::WeightLoader(const ModelConfig& config, const TensorSource& source)
    : config_(config), source_(source), spec_(parse_quant_spec(config.quantization_config, config.model_type + " config")) {}

std::string WeightLoader::resolve(const std::string& name, const char* suffix) const {
  std::string prefixed = config_.tensor_prefix + name;
  if (source_.has(prefixed + suffix)) return prefixed;
  if (!config_.tensor_prefix.empty() && source_.has(name + suffix)) return name;
  return "";
}

bool WeightLoader::has(const std::string& name) const { return !resolve(name, "").empty(); }

Tensor WeightLoader::tensor(const std::string& name) const {
  std::string full = resolve(name, "");
  if (full.empty()) {
    std::string want = config_.tensor_prefix + name;
    fail_input("checkpoint {} has no tensor '{}'", source_.file_of(want), want);
  }
  return source_.get(full);
}

LinearWeight WeightLoader::linear(const std::string& name) const {
  LinearWeight w;
  w.name = resolve(name, ".weight");
  if (w.name.empty()) w.name = resolve(name, ".weight_packed");
  if (w.name.empty()) {
    std::string want = config_.tensor_prefix + name + ".weight";
    fail_input("checkpoint {} has no tensor '{}' (nor .weight_packed)", source_.file_of(want), want);
  }
  Loader load{source_, w};
  if (source_.has(w.name + ".weight_packed")) {
    load.int4(spec_.method == QuantMethod::CompressedInt4 ? spec_.group_size : 0);
  } else {
    std::string wname = w.name + ".weight";
    Tensor weight = source_.get(wname);
    if (weight.ndim() != 2) load.bad(wname, fmt::format("a Linear weight must be 2-D, got {}", weight.describe()));
    DType t = weight.dtype();
    if (t == DType::U8 || t == DType::E2M1x2) {
      if (!source_.has(w.name + ".weight_scale")) load.bad(wname, "uint8 weight without a .weight_scale (not MXFP4?)");
      load.mxfp4(weight);
    } else if (t == DType::F8E4M3) {
      load.fp8(weight);
    } else if (is_float(t)) {
      load.dense(weight);
    } else {
      load.bad(wname, fmt::format("dtype {} is not a supported Linear weight", dtype_name(t)));
    }
  }
  if (source_.has(w.name + ".bias")) {
    Tensor b = source_.get(w.name + ".bias");
    if (b.shape() != Shape{w.out_features}) load.bad(w.name + ".bias", fmt::format("shape {} but out_features is {}", shape_str(b.shape()), w.out_features));
    w.bias = b.to(DType::F32);
  }
  cross_check(w);
  w.quantize_input = w.format == WeightFormat::Mxfp4 && spec_.method == QuantMethod::QuarkMxfp4 && spec_.dynamic_fp4_inputs;
  return w;
}

std::optional<std::pair<int64_t, int64_t>> WeightLoader::mxfp4_features(const std::string& name) const {
  const std::string base = resolve(name, ".weight");
  if (base.empty() || !source_.has(base + ".weight_scale") || source_.has(base + ".weight_packed") ||
      source_.has(base + ".weight_scale_inv") || source_.has(base + ".bias"))
    return std::nullopt;
  const std::string wname = base + ".weight", sname = base + ".weight_scale";
  const Shape full = source_.shape_of(wname), full_scale = source_.shape_of(sname);
  if (full.size() != 2 || full_scale.size() != 2) return std::nullopt;
  const DType t = source_.get_rows(wname, 0, 0).dtype(), ts = source_.get_rows(sname, 0, 0).dtype();
  if ((t != DType::U8 && t != DType::E2M1x2) || (ts != DType::U8 && ts != DType::E8M0)) return std::nullopt;
  const int64_t out = full[0], in = full[1] * 2;
  // Anything else is left to linear(), which reports it.
  if (in % 32 != 0 || full_scale != Shape{out, in / 32}) return std::nullopt;
  return std::pair<int64_t, int64_t>{out, in};
}

std::optional<LinearWeight> WeightLoader::mxfp4_part(const std::string& name, Features axis, int64_t begin,
                                                     int64_t end) const {
  const auto features = mxfp4_features(name);
  if (!features) return std::nullopt;
  return mxfp4_part(name, *features, axis, begin, end);
}

LinearWeight WeightLoader::mxfp4_part(const std::string& name, std::pair<int64_t, int64_t> features, Features axis,
                                      int64_t begin, int64_t end) const {
  const std::string base = resolve(name, ".weight");
  const std::string wname = base + ".weight", sname = base + ".weight_scale";
  const auto [out, in] = features;
  const int64_t total = axis == Features::Out ? out : in;
  const int64_t group = axis == Features::Out ? 1 : 32;
  if (begin < 0 || begin >= end || end > total || begin % group != 0 || end % group != 0)
    fail_input("{}: {} features [{}, {}) of {} do not fall on whole {}-wide scale groups", base,
               axis == Features::Out ? "output" : "input", begin, end, total, group);
  LinearWeight w;
  w.name = base;
  w.format = WeightFormat::Mxfp4;
  w.group_size = 32;
  if (axis == Features::Out) {
    w.out_features = end - begin, w.in_features = in;
    w.weight = as_u8(source_.get_rows(wname, begin, end));
    w.scale = as_u8(source_.get_rows(sname, begin, end));
  } else {
    w.out_features = out, w.in_features = end - begin;
    w.weight = as_u8(source_.get_cols(wname, begin / 2, end / 2));
    w.scale = as_u8(source_.get_cols(sname, begin / 32, end / 32));
  }
  cross_check(w);
  w.quantize_input = spec_.method == QuantMethod::QuarkMxfp4 && spec_.dynamic_fp4_inputs;
  return w;
}

void WeightLoader::cross_check(const LinearWeight& w) const {
  QuantMethod needed = QuantMethod::None;
  switch (w.format) {
    case WeightFormat::Dense: break;
    case WeightFormat::Mxfp4: needed = QuantMethod::QuarkMxfp4; break;
    case WeightFormat::Fp8Block: needed = QuantMethod::Fp8Block; break;
    case WeightFormat::Int4Group: needed = QuantMethod::CompressedInt4; break;
  }
  if (needed != QuantMethod::None && spec_.method != QuantMethod::None && spec_.method != needed)
    fail_input("{}: linear '{}' is stored as {} but quantization_config declares {}", source_.file_of(w.name + ".weight"),
               w.name, weight_format_name(w.format), quant_method_name(spec_.method));
  if (needed != QuantMethod::None && spec_.method == QuantMethod::None && mismatch_warnings_++ == 0)
    log::warn("linear '{}' is stored as {} but config.json has no quantization_config; using what the file holds",
              w.name, weight_format_name(w.format));
  if (exclude_disagrees(w) && mismatch_warnings_++ < 3)
    log::warn("linear '{}' is stored as {} but the quantization_config exclude list says {}; using what the file holds",
              w.name, weight_format_name(w.format), w.format == WeightFormat::Dense ? "quantized" : "excluded");
}

bool WeightLoader::exclude_disagrees(const LinearWeight& w) const {
  // Only Quark and compressed-tensors describe per-layer coverage by exclusion;
  // fp8 checkpoints keep routers in bf16 without listing them.
  if (spec_.method != QuantMethod::QuarkMxfp4 && spec_.method != QuantMethod::CompressedInt4) return false;
  if (is_router(w.name)) return false;
  bool excluded = spec_.is_excluded(w.name, config_.tensor_prefix);
  return excluded == (w.format != WeightFormat::Dense);
}

CheckpointSurvey WeightLoader::survey() const {
  CheckpointSurvey s;
  const std::string& prefix = config_.tensor_prefix;
  for (const std::string& name : source_.names()) {
    if (is_vision(name)) {
      ++s.skipped_tensors;
      continue;
    }
    // Names outside the prefix are reachable too (resolve() falls back to them).
    std::string bare = !prefix.empty() && name.starts_with(prefix) ? name.substr(prefix.size()) : name;
    if (bare.ends_with(".weight_scale") || bare.ends_with(".weight_scale_inv") || bare.ends_with(".weight_shape"))
      continue;  // counted with their Linear
    std::string base;
    if (bare.ends_with(".weight_packed")) {
      base = bare.substr(0, bare.size() - 14);
    } else if (bare.ends_with(".weight") && source_.get(name).ndim() == 2 && bare.find("embed_tokens") == std::string::npos) {
      base = bare.substr(0, bare.size() - 7);
    }
    if (base.empty()) {
      ++s.other_tensors;
      continue;
    }
    try {
      LinearWeight w = linear(base);
      ++s.linears[w.format];
      if (exclude_disagrees(w)) ++s.exclude_mismatches;
    } catch (const Error& e) {
      s.errors.push_back(e.what());
    }
  }
  return s;
}

std::string WeightLoader::summary() const {
  CheckpointSurvey s = survey();
  std::string out = fmt::format("quantization: {}{}\n", quant_method_name(spec_.method),
                                spec_.dynamic_fp4_inputs ? " (checkpoint quantizes MXFP4 inputs: W4A4 contract)" : "");
  for (const auto& [format, n] : s.linears) out += fmt::format("{}: {} linears\n", weight_format_name(format), n);
  out += fmt::format("other tensors: {}\nskipped (vision_tower / mm_projector): {}\n", s.other_tensors,
                     s.skipped_tensors);
  if (s.exclude_mismatches) out += fmt::format("disagreeing with the exclude list (file wins): {}\n", s.exclude_mismatches);
  for (const auto& e : s.errors) out += fmt::format("error: {}\n", e);
  return out;
}

}  // namespace mx
