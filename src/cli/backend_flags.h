// Flags that choose how the Ops backend computes, shared by the subcommands
// that load a model (serve, generate, perplexity).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "model/causal_lm.h"
#include "ops/kernel_names.h"

namespace mx::cli {

struct BackendFlags {
  bool exact_numerics = false;
  std::string attention_kernel = "auto";
  std::string mxfp4_gemm_kernel = "auto";
  std::string moe_kernel = "auto";
  std::string w4a4_mma = "auto";
  bool profile_ops = false;

  void add_to(CLI::App* cmd) {
    cmd->add_flag("--exact-numerics", exact_numerics,
                  "with --device cuda: F32 activations through every GEMM and F32 attention, matching the cpu "
                  "backend to F32 rounding (slow; for checking results)");
    cmd->add_option("--attention-kernel", attention_kernel,
                    "with --device cuda: force an attention kernel family: auto (by shape), generic (CUDA cores, "
                    "any dims), tensor-core (FlashAttention-style prefill), mla-decode (MLA absorbed decode)")
        ->check(CLI::IsMember({"auto", "generic", "tensor-core", "mla-decode"}))
        ->capture_default_str();
    cmd->add_option("--mxfp4-gemm-kernel", mxfp4_gemm_kernel,
                    "with --device cuda: force the MXFP4 dense GEMM kernel wherever it takes the shape (auto elsewhere, "
                    "the first refused shape warned): " +
                        join_names(mxfp4_gemm_kernel_names()) + " (docs/kernels.md)")
        ->check(CLI::IsMember(mxfp4_gemm_kernel_names()))
        ->capture_default_str();
    cmd->add_option("--moe-kernel", moe_kernel,
                    "with --device cuda: force the fused-MoE path wherever it takes the step (auto elsewhere, the first "
                    "refused size warned): " +
                        join_names(moe_kernel_names()) + " (docs/kernels.md)")
        ->check(CLI::IsMember(moe_kernel_names()))
        ->capture_default_str();
    cmd->add_option("--w4a4-mma", w4a4_mma,
                    "with --device cuda --w4a4: the W4A4 MMAs: auto (bf16), bf16 (quantize-dequantized "
                    "activations on BF16 tensor cores), fp8 / fp8-256 (block scales folded into E4M3, FP8 tensor cores: "
                    "the fused MoE's prefill, FP32 promotion every 128 / 256 along K, its decode steps keep BF16; and "
                    "the dense MXFP4 linears at 12-64 tokens where measured faster, which then hold a second, FP8-ordered "
                    "copy of their codes; docs/w4a4-fp8.md); without --w4a4 on a W4A4 checkpoint, or with "
                    "--exact-numerics, there is nothing for it to change")
        ->check(CLI::IsMember(w4a4_mma_names()))
        ->capture_default_str();
    cmd->add_flag("--profile-ops", profile_ops,
                  "time every op of the forward pass on the device's clock (CUDA events on a GPU) and log, at "
                  "exit, a table per kind of step (decode, prefill/mixed) of each op's and each all-reduce's "
                  "time per step; costs a few microseconds of host time per op");
  }
  void apply(LoadOptions& load) const {
    load.exact_numerics = exact_numerics;
    load.attention_kernel = attention_kernel;
    load.mxfp4_gemm_kernel = mxfp4_gemm_kernel;
    load.moe_kernel = moe_kernel;
    load.w4a4_mma = w4a4_mma;
    load.profile_ops = profile_ops;
  }
};

}  // namespace mx::cli
