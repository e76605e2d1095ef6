// config.json's quantization_config, validated and reduced to what the engine
// acts on. Three methods are supported: Quark OCP-MXFP4 ("quark"), FP8 with
// 128x128 blocks ("fp8"), and compressed-tensors pack-quantized INT4; anything
// else is refused with mx::InvalidArgument naming the key and value.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx {

enum class QuantMethod { None, QuarkMxfp4, Fp8Block, CompressedInt4 };
std::string_view quant_method_name(QuantMethod m);

// One entry of Quark's `exclude` / compressed-tensors' `ignore`: "re:<regex>"
// is matched like Python's re.match (anchored at the start only), anything
// else must equal the layer name exactly.
class NamePattern {
 public:
  explicit NamePattern(const std::string& entry);
  bool matches(const std::string& layer) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool is_regex_ = false;
  std::regex regex_;
};

struct QuantSpec {
  QuantMethod method = QuantMethod::None;
  int64_t group_size = 0;          // 32 (mxfp4, int4) or 128 (fp8 block)
  bool dynamic_fp4_inputs = false; // quark input_tensors: fp4 per-32, dynamic (W4A4 contract)
  std::vector<NamePattern> excluded;

  // True when `layer` (e.g. "language_model.model.layers.0.self_attn.q_a_proj")
  // or the same name without `prefix` matches an exclude/ignore entry.
  bool is_excluded(const std::string& layer, const std::string& prefix) const;
};

// `qc` may be null (no quantization). `origin` names the config in messages.
QuantSpec parse_quant_spec(const nlohmann::json& qc, const std::string& origin);

}  // namespace mx
