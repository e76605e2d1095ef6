// Tensor / expert parallelism inside one process (docs/parallel.md): one
// DecoderModel per rank, each holding its shard of the weights on its own
// device (device_index + rank) and driven by its own worker thread. The
// engine calls this like any CausalLM from rank 0's side: every step's
// ForwardBatch is handed to all ranks (shared memory), every rank runs the
// forward pass (meeting in the per-block all_reduces), and rank 0's logits
// are returned for sampling. A rank's failure stops the group with its error.
#pragma once
#include <filesystem>
#include <memory>

#include "model/causal_lm.h"

namespace mx {

// options.tensor_parallel_size ranks (> 1), options.expert_parallel, over the
// in-process communicator (CPU backend) or, with device "cuda" in a CUDA
// build, whatever make_parallel_communicators() provides.
std::unique_ptr<CausalLM> load_parallel_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options);

}  // namespace mx
