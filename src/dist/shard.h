// Megatron-style sharding of a model's weights over the ranks of a tensor-
// parallel group, done while loading so the model code is written once:
// column-parallel Linears keep a slice of their output features (rows),
// row-parallel Linears a slice of their input features (columns) and their
// partial outputs are summed by one all_reduce per block. Quantized formats
// are cut only on their scale-group boundaries (MXFP4 32, INT4 its group, FP8
// 128x128 blocks), so a shard holds exactly the bytes of the full weight.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "dist/communicator.h"
#include "quant/linear_weight.h"
#include "quant/weight_loader.h"

namespace mx {

// Which slice of the model this rank holds. The default is the whole model.
struct ShardSpec {
  int rank = 0;
  int world = 1;
  // MoE: each rank owns experts [rank*E/world, (rank+1)*E/world) whole,
  // instead of a slice of every expert's intermediate dim (TP-MoE).
  bool expert_parallel = false;
  Communicator* comm = nullptr;  // required when world > 1; not owned

  bool sharded() const { return world > 1; }
  // [begin, end) of `units` split evenly over the ranks; throws naming `what`
  // when units % world != 0.
  std::pair<int64_t, int64_t> part(int64_t units, const std::string& what) const;
  // Sums partial outputs of row-parallel blocks over the ranks (no-op unsharded).
  void all_reduce(Tensor& x) const;
};

// Output features [begin, end) of w (a view). FP8 cut inside its 128x128
// blocks becomes exact F32 values (the block scales cannot follow the cut);
// MXFP4 / INT4 cuts inside a scale group are refused (InvalidArgument).
LinearWeight slice_out_features(const LinearWeight& w, int64_t begin, int64_t end);
// Input features [begin, end) of w (a copy of those columns); the bias is kept.
LinearWeight slice_in_features(const LinearWeight& w, int64_t begin, int64_t end);

// Column-parallel: this rank's share of w's outputs, split in whole units of
// `unit` features (a head's width; 1 for plain features).
LinearWeight column_parallel(const LinearWeight& w, const ShardSpec& s, int64_t unit = 1);
// Row-parallel: this rank's share of w's inputs (whole units of `unit`); the
// bias stays on rank 0 only, so the all_reduce adds it once.
LinearWeight row_parallel(const LinearWeight& w, const ShardSpec& s, int64_t unit = 1);

// column_parallel(w.linear(name), s) / row_parallel(...), reading only this
// rank's slice where the format allows it (MXFP4, WeightLoader::mxfp4_part):
// a --load-format dummy source then makes only those bytes, so N ranks of a
// full-width Kimi-K2.5 do not each make every expert whole. Same result.
LinearWeight load_column_parallel(const WeightLoader& w, const std::string& name, const ShardSpec& s);
LinearWeight load_row_parallel(const WeightLoader& w, const std::string& name, const ShardSpec& s);

// A weight of w's shape and format whose every value is 0 (expert parallelism:
// the stand-in for experts another rank owns, which contributes exactly 0).
LinearWeight zero_linear_like(const LinearWeight& w);

}  // namespace mx
