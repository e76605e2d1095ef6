// Runs a setup step once per GPU. Kernel attributes set with
// cudaFuncSetAttribute (e.g. more than 48 KB of dynamic shared memory) hold
// for the device that was current when they were set; a process-wide "once"
// leaves every other GPU of a tensor-parallel group without them, and the
// first launch there fails with "invalid argument" (found by a TP=2 prefill).
// Keep one instance per call site (a function-local static).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "cuda/cuda_check.h"

namespace mx::cuda {

// Returns the current device's index (0..63) and passes it to a setup that
// takes an int, so that a call site can keep per-device results of its setup
// (e.g. an occupancy) without asking for the device again.
class PerDeviceOnce {
 public:
  template <class F>
  int operator()(F&& setup) {
    int device = 0;
    MX_CUDA_CHECK(cudaGetDevice(&device));
    device &= 63;
    const uint64_t bit = uint64_t(1) << device;
    if (done_.load(std::memory_order_acquire) & bit) return device;
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed) & bit) return device;
    if constexpr (std::is_invocable_v<F, int>) setup(device);
    else setup();
    done_.fetch_or(bit, std::memory_order_release);
    return device;
  }

 private:
  std::atomic<uint64_t> done_{0};
  std::mutex mutex_;
};

}  // namespace mx::cuda
