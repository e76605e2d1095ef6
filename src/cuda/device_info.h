// Properties of the current CUDA device that kernel launches size their grids
// by, queried once per device (a launch on the decode path must not pay a
// driver query each time).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>

#include "cuda/cuda_check.h"

namespace mx::cuda {

// Streaming multiprocessors of the current device.
inline int sm_count() {
  static std::atomic<int> counts[64] = {};
  int device = 0;
  MX_CUDA_CHECK(cudaGetDevice(&device));
  std::atomic<int>& cached = counts[device & 63];
  int n = cached.load(std::memory_order_relaxed);
  if (n == 0) {
    MX_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    cached.store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace mx::cuda
