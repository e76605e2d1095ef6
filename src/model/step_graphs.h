// Which steps a model records as step graphs (CUDA graphs; docs/cuda-graphs.md)
// and how they are padded to a recorded shape. Host logic only: the backend
// side is Ops::begin_capture / replay_step (src/cuda/backend/step_graphs.h).
//
// A recording replays one exact sequence of kernels, so a step must look the
// same to the ops each time: decode steps only (one new token per sequence,
// logits for each), the batch padded up to a size of a short list derived from
// --max-num-seqs, the block tables padded to a power-of-two width. A padding
// sequence decodes token 0 at position 0 into a scratch KV block the engine
// never hands out; its logits are dropped.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "model/causal_lm.h"

namespace mx {

struct StepGraphConfig {
  // Padded decode batch sizes, ascending (decode_graph_batch_sizes); empty: off.
  std::vector<int64_t> batch_sizes;
  int64_t max_blocks_per_seq = 0;  // ceil(max_model_len / block_size): the widest table
};

// 1, 2, 4, 8, then every multiple of 8 up to max_num_seqs (itself the last
// size), as vLLM captures.
std::vector<int64_t> decode_graph_batch_sizes(int64_t max_num_seqs);

struct DecodeGraphPlan {
  int64_t batch = 0;         // real sequences
  int64_t padded_batch = 0;  // a size of the config's list
  int64_t table_width = 0;   // block table entries per sequence
  uint64_t key = 0;          // (padded_batch, table_width)
};

// The plan for a step, or nothing when the step is not a decode step the
// config covers (prefill tokens, a sequence without logits, too many
// sequences or blocks).
std::optional<DecodeGraphPlan> plan_decode_graph(const ForwardBatch& batch, const StepGraphConfig& config,
                                                 int64_t block_size);

// batch plus padded_batch - batch padding sequences (token 0, position 0, one
// new token into `scratch_block`).
ForwardBatch pad_decode_batch(const ForwardBatch& batch, const DecodeGraphPlan& plan, int32_t scratch_block);

}  // namespace mx
