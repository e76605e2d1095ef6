// Flags that choose how the Ops backend computes, shared by the subcommands
// that load a model (serve, generate, perplexity).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "model/causal_lm.h"

namespace mx::cli {

struct BackendFlags {
  bool exact_numerics = false;
  std::string attention_kernel = "auto";

  void add_to(CLI::App* cmd) {
    cmd->add_flag("--exact-numerics", exact_numerics,
                  "with --device cuda: F32 activations through every GEMM and F32 attention, matching the cpu "
                  "backend to F32 rounding (slow; for checking results)");
    cmd->add_option("--attention-kernel", attention_kernel,
                    "with --device cuda: force an attention kernel family: auto (by shape), generic (CUDA cores, "
                    "any dims), tensor-core (FlashAttention-style prefill), mla-decode (MLA absorbed decode)")
        ->check(CLI::IsMember({"auto", "generic", "tensor-core", "mla-decode"}))
        ->capture_default_str();
  }
  void apply(LoadOptions& load) const {
    load.exact_numerics = exact_numerics;
    load.attention_kernel = attention_kernel;
  }
};

}  // namespace mx::cli
