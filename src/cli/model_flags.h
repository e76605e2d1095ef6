// The flags every subcommand that loads a model shares (serve, generate,
// perplexity): where it runs, its activation mode and threads, the backend's
// numerics (backend_flags.h) and, for the commands that shard, parallelism and
// dummy weights. A command's options struct derives from ModelFlags.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cli/backend_flags.h"
#include "model/causal_lm.h"

namespace mx::cli {

struct ModelFlags {
  std::string device = "cpu";
  bool w4a4 = false;
  int threads = 0;
  BackendFlags backend;
  // add_to(cmd, /*parallel=*/true) only.
  int tensor_parallel_size = 1;
  bool expert_parallel = false;
  std::string load_format = "auto";
  uint64_t dummy_seed = 0;

  void add_to(CLI::App* cmd, bool parallel) {
    cmd->add_option("--device", device, "where the model runs: cpu or cuda (a build with -DMXSERVE_CUDA=ON)")
        ->capture_default_str();
    cmd->add_flag("--w4a4", w4a4, "MXFP4 Linears quantize their inputs per 32 (W4A4); default W4A16");
    cmd->add_option("--threads", threads, "CPU threads for the model (0: all cores)")->check(CLI::NonNegativeNumber);
    backend.add_to(cmd);
    if (!parallel) return;
    cmd->add_option("--tensor-parallel-size", tensor_parallel_size,
                    "devices (ranks) to shard the model over, one worker thread each (docs/parallel.md)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_flag("--enable-expert-parallel", expert_parallel,
                  "MoE experts split whole over the tensor-parallel ranks instead of slicing each expert");
    cmd->add_option("--load-format", load_format,
                    "auto: the checkpoint's weights; dummy: random weights of the config's shapes and formats (no "
                    "weight files needed)")
        ->capture_default_str();
    cmd->add_option("--dummy-seed", dummy_seed, "seed of --load-format dummy weights")->capture_default_str();
  }

  LoadOptions load_options() const {
    LoadOptions load;
    load.activation_mode = w4a4 ? ActivationMode::W4A4 : ActivationMode::W4A16;
    load.num_threads = threads;
    load.device = device;
    backend.apply(load);
    load.tensor_parallel_size = tensor_parallel_size;
    load.expert_parallel = expert_parallel;
    load.load_format = load_format;
    load.dummy_seed = dummy_seed;
    return load;
  }
};

}  // namespace mx::cli
