// Resolves, per tensor, how each Linear of a checkpoint is stored and builds
// its LinearWeight. The decision is made from what the file holds (dtype, a
// sibling .weight_scale / .weight_scale_inv / .weight_packed) and cross-checked
// against config.json's quantization_config (quark MXFP4, fp8 block,
// compressed-tensors pack-quantized INT4); unsupported specs are refused with
// a message naming the spec and the tensor.
#pragma once
#include <string>

#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/linear_weight.h"

namespace mx {

class WeightLoader {
 public:
  // Validates the quantization_config up front; throws mx::InvalidArgument
  // for an unknown quant_method or an unsupported spec.
  WeightLoader(const ModelConfig& config, const TensorSource& source);

  // name: the Linear's prefix, e.g. "model.layers.3.mlp.experts.7.gate_proj"
  // (tensor_prefix is added by the loader). Throws naming the missing tensor.
  LinearWeight linear(const std::string& name) const;
  // A plain tensor (norm weights, embeddings, correction bias) by full name
  // without prefix, as stored.
  Tensor tensor(const std::string& name) const;
  bool has(const std::string& name) const;

  // One line per format: "mxfp4: 1152 linears, bf16: 40 linears, ...".
  std::string summary() const;

 private:
  const ModelConfig& config_;
  const TensorSource& source_;
};

}  // namespace mx
