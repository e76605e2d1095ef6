// What the CUDA side tells the host about a GPU: free and total memory
// (cudaMemGetInfo), for sizing the KV cache from what the weights left.
// Installed as ops/backend_registry.h's device-memory hook by the binary
// (src/cli/cuda_serving.cc), so serve asks through mx_ops without CUDA headers.
#pragma once
#include "ops/backend_registry.h"

namespace mx::cuda {

// Throws mx::Error naming the device when the CUDA runtime call fails.
DeviceMemoryInfo gpu_memory_info(int device_index);

}  // namespace mx::cuda
