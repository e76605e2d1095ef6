// Which Ops backend a model runs on, chosen by name ("cpu", "cuda") at load.
// The CPU backend is always there; a device backend registers itself when the
// binary is built with it (src/cli/cuda_backend.cc under MXSERVE_CUDA), so the
// model layer never depends on CUDA.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace mx {

struct BackendOptions {
  ActivationMode activation_mode = ActivationMode::W4A16;
  int device_index = 0;         // which GPU of the machine
  bool poison_outputs = false;  // fill fresh device buffers with NaN (parity tests)
};

using OpsFactory = std::unique_ptr<Ops> (*)(const BackendOptions& options);

void register_ops_backend(const std::string& name, OpsFactory factory);
// Throws InvalidArgument naming the available backends when `name` is unknown
// (e.g. "cuda" in a build without CUDA).
std::unique_ptr<Ops> make_ops(const std::string& name, const BackendOptions& options);
std::vector<std::string> available_ops_backends();

}  // namespace mx
