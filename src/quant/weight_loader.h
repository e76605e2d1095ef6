// Resolves, per tensor, how each Linear of a checkpoint is stored and builds
// its LinearWeight. The decision is made from what the file holds (dtype, a
// sibling .weight_scale / .weight_scale_inv / .weight_packed) and cross-checked
// against config.json's quantization_config (quark MXFP4, fp8 block,
// compressed-tensors pack-quantized INT4); unsupported specs are refused with
// a message naming the spec and the tensor.
#pragma once
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/linear_weight.h"
#include "quant/quant_spec.h"

namespace mx {

std::string_view weight_format_name(WeightFormat f);  // "bf16", "mxfp4", "fp8-block", "int4-group"

// What a checkpoint holds, as the loader sees it (inspect, tests).
struct CheckpointSurvey {
  std::map<WeightFormat, int64_t> linears;  // Linear weights per format
  int64_t other_tensors = 0;                // norms, embeddings, correction biases
  int64_t skipped_tensors = 0;              // vision_tower / mm_projector / outside tensor_prefix
  int64_t exclude_mismatches = 0;           // format disagrees with the exclude list (file wins)
  std::vector<std::string> errors;          // linears that failed to load, with the reason
};

class WeightLoader {
 public:
  // Validates the quantization_config up front; throws mx::InvalidArgument
  // for an unknown quant_method or an unsupported spec. `source` must outlive
  // the loader; the config is copied.
  WeightLoader(const ModelConfig& config, const TensorSource& source);

  // name: the Linear's prefix, e.g. "model.layers.3.mlp.experts.7.gate_proj"
  // (tensor_prefix is added by the loader). Throws naming the missing tensor.
  LinearWeight linear(const std::string& name) const;
  // Output features (rows) or input features (columns) [begin, end) of an
  // MXFP4 Linear, reading only those bytes (TensorSource::get_rows/get_cols:
  // a dummy source makes only the slice). Equal to the same slice of
  // linear(name). nullopt when the Linear is not MXFP4 (callers then read the
  // whole weight and cut it); throws InvalidArgument for a cut inside a scale
  // group or out of range.
  enum class Features { Out, In };
  std::optional<LinearWeight> mxfp4_part(const std::string& name, Features axis, int64_t begin, int64_t end) const;
  // The same for a Linear whose mxfp4_features(name) the caller already has
  // (they are not looked up again).
  LinearWeight mxfp4_part(const std::string& name, std::pair<int64_t, int64_t> features, Features axis, int64_t begin,
                          int64_t end) const;
  // {out_features, in_features} of an MXFP4 Linear without reading its
  // values; nullopt for other formats (or a bias, or shapes linear() refuses).
  std::optional<std::pair<int64_t, int64_t>> mxfp4_features(const std::string& name) const;
  // A plain tensor (norm weights, embeddings, correction bias) by full name
  // without prefix, as stored.
  Tensor tensor(const std::string& name) const;
  bool has(const std::string& name) const;

  // One line per format: "mxfp4: 1152 linears, bf16: 40 linears, ...".
  std::string summary() const;
  // Classifies every tensor of the checkpoint (loads each Linear's views).
  CheckpointSurvey survey() const;
  const QuantSpec& spec() const { return spec_; }

 private:
  // prefix + name when the checkpoint has it, else name; "" when neither.
  std::string resolve(const std::string& name, const char* suffix) const;
  void cross_check(const LinearWeight& w) const;
  bool exclude_disagrees(const LinearWeight& w) const;

  ModelConfig config_;
  const TensorSource& source_;
  QuantSpec spec_;
  mutable std::atomic<int64_t> mismatch_warnings_{0};
};

}  // namespace mx
