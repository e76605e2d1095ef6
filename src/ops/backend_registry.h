// Which Ops backend a model runs on, chosen by name ("cpu", "cuda") at load.
// The CPU backend is always there; a device backend registers itself when the
// binary is built with it (src/cli/cuda_backend.cc under MXSERVE_CUDA), so the
// model layer never depends on CUDA.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace mx {

struct BackendOptions {
  ActivationMode activation_mode = ActivationMode::W4A16;
  int device_index = 0;         // which GPU of the machine
  bool poison_outputs = false;  // fill fresh device buffers with NaN (parity tests)
  // CUDA: F32 activations through every GEMM and F32 attention, matching the
  // CPU reference to F32 rounding (slow; for checking). The CPU backend is that
  // reference already.
  bool exact_numerics = false;
  // CUDA attention kernel family: auto | generic | tensor-core | mla-decode.
  std::string attention_kernel = "auto";
  // CUDA MXFP4 kernels forced where they take the shape (names: ops/kernel_names.h; rule: cuda/backend/kernel_choice.h):
  // --mxfp4-gemm-kernel (auto | strip | ... | wgmma) and --moe-kernel (auto | routed | ...).
  std::string mxfp4_gemm_kernel = "auto";
  std::string moe_kernel = "auto";
  // CUDA W4A4 fused-MoE prefill MMAs: auto | bf16 | fp8 | fp8-256.
  std::string w4a4_mma = "auto";
};

using OpsFactory = std::unique_ptr<Ops> (*)(const BackendOptions& options);

void register_ops_backend(const std::string& name, OpsFactory factory);
// Throws InvalidArgument naming the available backends when `name` is unknown
// (e.g. "cuda" in a build without CUDA).
std::unique_ptr<Ops> make_ops(const std::string& name, const BackendOptions& options);
std::vector<std::string> available_ops_backends();

// Free and total memory of a GPU, for sizing the KV cache from what the weights
// left (serve's --gpu-memory-utilization). The CUDA build installs the hook
// (cuda/backend/device_info.h); without it device_memory_info throws
// InvalidArgument (a CPU-only build).
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
using DeviceMemoryInfoHook = DeviceMemoryInfo (*)(int device_index);
void set_device_memory_info_hook(DeviceMemoryInfoHook hook);
DeviceMemoryInfo device_memory_info(int device_index);

}  // namespace mx
