// Tensor / expert parallelism (docs/parallel.md): one DecoderModel per rank,
// each holding its shard of the weights on its own device and driven by its
// own worker thread. The engine calls this like any CausalLM from rank 0's
// side: every step's ForwardBatch is handed to all ranks, every rank runs the
// forward pass (meeting in the per-block all_reduces), and rank 0's logits
// are returned for sampling. A rank's failure stops the group with its error.
//
// In one process (load_parallel_causal_lm) the ranks are all local and get
// the step by shared memory. Across nodes, node 0 (load_multinode_causal_lm)
// sends every call it fans out (load, allocate_kv_cache, forward, shutdown)
// over TCP to nodes 1..K-1 (run_worker_node), which run it on their ranks.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "model/causal_lm.h"

namespace mx {

// options.tensor_parallel_size ranks (> 1), options.expert_parallel, over the
// in-process communicator (CPU backend) or, with device "cuda" in a CUDA
// build, whatever make_parallel_communicators() provides.
std::unique_ptr<CausalLM> load_parallel_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options);

// --nnodes, --node-rank, --master-addr, --master-port of `mxserve serve`.
struct MultiNodeOptions {
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_s = 300;  // startup: how long the nodes wait for each other
};

// Node 0 of a group of options.tensor_parallel_size ranks over nodes.nnodes
// nodes: waits for the other nodes (refusing one that serves another model or
// flags), loads ranks 0 .. N/K-1 here and returns the model the engine drives.
std::unique_ptr<CausalLM> load_multinode_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options,
                                                   const MultiNodeOptions& nodes);

// Nodes 1..K-1: joins node 0, loads this node's ranks and runs node 0's
// commands until node 0 shuts the group down (returns). Throws mx::Error when
// node 0 goes away or the group failed, InvalidArgument when node 0 refused
// this node.
void run_worker_node(const std::filesystem::path& model_dir, const LoadOptions& options, const MultiNodeOptions& nodes);

}  // namespace mx
