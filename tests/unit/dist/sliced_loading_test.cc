// A tensor-parallel rank reads only its slice of each MXFP4 expert
// (WeightLoader::mxfp4_part, load_column_parallel / load_row_parallel): from a
// dummy source the slice is made alone, from a checkpoint it is cut from the
// mmap'd tensor; either way it must equal the same slice of the whole tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "dist/shard.h"
#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/dummy_source.h"
#include "quant/synth_checkpoint.h"
#include "quant/weight_loader.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

fs::path synth(const std::string& preset) {
  fs::path dir = fs::temp_directory_path() / ("mx_sliced_" + std::to_string(::getpid()) + "_" + preset);
  if (!fs::exists(dir / "config.json")) write_synthetic_checkpoint(dir, preset, 3);
  return dir;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool same_linear(const LinearWeight& a, const LinearWeight& b) {
  return a.format == b.format && a.out_features == b.out_features && a.in_features == b.in_features &&
         a.quantize_input == b.quantize_input && same_bytes(a.weight, b.weight) &&
         a.scale.defined() == b.scale.defined() && (!a.scale.defined() || same_bytes(a.scale, b.scale));
}

// Every 2-D tensor of the dummy weights of each preset: rows and columns made
// alone equal those of the whole tensor, for every kind (codes, scales, BF16,
// FP8, INT4, norms, embeddings).
TEST(SlicedLoading, DummyRowsAndColumnsEqualSlicesOfTheWholeTensor) {
  for (const char* preset : {"kimi-k25-mxfp4", "kimi-k25-int4", "deepseek-v3-fp8", "llama"}) {
    const ModelConfig config = load_model_config(synth(preset));
    DummyTensorSource source(config, 11);
    int checked = 0;
    for (const std::string& name : source.names()) {
      const Tensor whole = source.get(name);
      EXPECT_EQ(source.shape_of(name), whole.shape()) << name;
      if (whole.ndim() != 2 || whole.dim(0) < 2 || whole.dim(1) < 3) continue;
      const int64_t r0 = whole.dim(0) / 3, r1 = whole.dim(0) - 1, c0 = 1, c1 = whole.dim(1) - 1;
      const Tensor rows = source.get_rows(name, r0, r1);
      ASSERT_TRUE(same_bytes(rows, whole.slice_rows(r0, r1).clone())) << preset << " " << name << " rows";
      // The default implementation (read whole, copy the columns) is the reference.
      const Tensor cols = source.get_cols(name, c0, c1);
      ASSERT_TRUE(same_bytes(cols, source.TensorSource::get_cols(name, c0, c1))) << preset << " " << name << " cols";
      ++checked;
    }
    EXPECT_GT(checked, 10) << preset;
  }
}

// The loader's MXFP4 parts equal slice_out_features / slice_in_features of the
// whole Linear, from the dummy source and from the synthetic checkpoint file.
TEST(SlicedLoading, Mxfp4PartsEqualCutsOfTheWholeLinear) {
  const fs::path dir = synth("kimi-k25-mxfp4");
  const ModelConfig config = load_model_config(dir);
  DummyTensorSource dummy(config, 5);
  auto file = open_safetensors(dir);
  for (const TensorSource* source : {static_cast<const TensorSource*>(&dummy), static_cast<const TensorSource*>(file.get())}) {
    WeightLoader w(config, *source);
    const std::string gate = "model.layers.1.mlp.experts.2.gate_proj", down = "model.layers.1.mlp.experts.2.down_proj";
    const auto features = w.mxfp4_features(gate);
    ASSERT_TRUE(features.has_value());
    const LinearWeight whole_gate = w.linear(gate), whole_down = w.linear(down);
    EXPECT_EQ(features->first, whole_gate.out_features);
    EXPECT_EQ(features->second, whole_gate.in_features);
    const int64_t out = whole_gate.out_features, in = whole_down.in_features;
    EXPECT_TRUE(same_linear(*w.mxfp4_part(gate, WeightLoader::Features::Out, out / 2, out),
                            slice_out_features(whole_gate, out / 2, out)));
    EXPECT_TRUE(same_linear(*w.mxfp4_part(down, WeightLoader::Features::In, 32, in),
                            slice_in_features(whole_down, 32, in)));
    // Through the sharding helpers, rank 1 of 2: the same as cutting the whole Linear.
    ShardSpec s;
    s.rank = 1, s.world = 2;
    EXPECT_TRUE(same_linear(load_column_parallel(w, gate, s), column_parallel(whole_gate, s)));
    EXPECT_TRUE(same_linear(load_row_parallel(w, down, s), row_parallel(whole_down, s)));
    // A cut inside a scale group is refused; a BF16 Linear has no MXFP4 part.
    EXPECT_THROW(w.mxfp4_part(down, WeightLoader::Features::In, 16, in), InvalidArgument);
    EXPECT_FALSE(w.mxfp4_features("model.layers.1.self_attn.o_proj").has_value());
  }
}

// A source that counts whole-tensor reads, over the dummy source.
class CountingSource : public TensorSource {
 public:
  explicit CountingSource(const TensorSource& inner) : inner_(inner) {}
  bool has(const std::string& name) const override { return inner_.has(name); }
  Tensor get(const std::string& name) const override {
    ++whole_reads;
    return inner_.get(name);
  }
  std::vector<std::string> names() const override { return inner_.names(); }
  std::string file_of(const std::string& name) const override { return inner_.file_of(name); }
  Tensor get_rows(const std::string& name, int64_t begin, int64_t end) const override {
    return inner_.get_rows(name, begin, end);
  }
  Shape shape_of(const std::string& name) const override { return inner_.shape_of(name); }
  Tensor get_cols(const std::string& name, int64_t begin, int64_t end) const override {
    return inner_.get_cols(name, begin, end);
  }
  mutable int whole_reads = 0;

 private:
  const TensorSource& inner_;
};

// What sliced loading is for: a rank's MXFP4 expert parts never read (or, from
// dummy weights, make) a whole tensor.
TEST(SlicedLoading, RanksNeverReadWholeMxfp4Experts) {
  const ModelConfig config = load_model_config(synth("kimi-k25-mxfp4"));
  DummyTensorSource dummy(config, 5);
  CountingSource source(dummy);
  WeightLoader w(config, source);
  ShardSpec s;
  s.rank = 1, s.world = 2;
  const LinearWeight gate = load_column_parallel(w, "model.layers.1.mlp.experts.2.gate_proj", s);
  const LinearWeight down = load_row_parallel(w, "model.layers.1.mlp.experts.2.down_proj", s);
  EXPECT_EQ(gate.format, WeightFormat::Mxfp4);
  EXPECT_EQ(down.format, WeightFormat::Mxfp4);
  EXPECT_EQ(source.whole_reads, 0);
}

}  // namespace
}  // namespace mx
