// `--load-format dummy`: a TensorSource that serves every tensor a model asks
// for, built from config.json alone, so full-width shapes (Kimi-K2.5: hidden
// 7168, 384 experts) run without a checkpoint on disk. Each Linear gets the
// format quantization_config implies (Quark: MXFP4 unless excluded, in the
// Quark layout; fp8: 128x128 blocks except the router and lm_head;
// compressed-tensors: INT4 groups unless ignored; otherwise BF16), routers
// stay BF16 as in the real checkpoints. Values follow synth_values.h's rules
// (quantized formats are drawn directly as codes plus a block scale of that
// magnitude, so every E8M0 scale is valid). A tensor is made when get() asks
// for it and not kept, so a layer is materialized once (by the model), and
// every value is a pure function of (seed, tensor name, index): the same seed
// gives the same weights whatever the thread count.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/linear_weight.h"
#include "quant/quant_spec.h"

namespace mx {

class DummyTensorSource : public TensorSource {
 public:
  // Throws mx::InvalidArgument naming the config field that is missing or
  // unusable (e.g. an MXFP4 Linear whose input size is not a multiple of 32).
  DummyTensorSource(const ModelConfig& config, uint64_t seed);

  bool has(const std::string& name) const override { return entries_.count(name) > 0; }
  Tensor get(const std::string& name) const override;
  // Only the slice is made (a tensor-parallel rank's share), with the values
  // the same slice of get(name) has.
  Tensor get_rows(const std::string& name, int64_t begin, int64_t end) const override;
  Tensor get_cols(const std::string& name, int64_t begin, int64_t end) const override;
  Shape shape_of(const std::string& name) const override { return entry(name).shape; }
  std::vector<std::string> names() const override;
  std::string file_of(const std::string& name) const override;

  // "dummy weights (seed 0): mxfp4: 24 linears; bf16: 13 linears; other tensors: 9"
  std::string summary() const;

 private:
  enum class Kind { Norm, Embedding, CorrectionBias, Dense, Mxfp4, Mxfp4Scale, Fp8, Fp8Scale, Int4, Int4Scale, Int4Shape };
  struct Entry {
    Kind kind;
    Shape shape;
    int64_t in_features = 0;  // Linears: fan-in, for the weight scale
    int64_t group = 0;        // INT4 group size
  };
  void add_linear(const std::string& name, int64_t out, int64_t in);
  const Entry& entry(const std::string& name) const;
  static DType dtype_of(Kind kind);
  void fill(const std::string& name, const Entry& e, int64_t first, int64_t count, uint8_t* out) const;
  void add(const std::string& name, Kind kind, Shape shape) { entries_[prefix_ + name] = {kind, std::move(shape)}; }
  WeightFormat format_of(const std::string& full_name) const;
  void describe_llama(const ModelConfig& c);
  void describe_deepseek(const ModelConfig& c);

  std::string prefix_;
  uint64_t seed_;
  QuantSpec spec_;
  std::map<std::string, Entry> entries_;
  std::map<WeightFormat, int64_t> linears_;
  int64_t int4_group_ = 32;
};

}  // namespace mx
