// Per-(device, stream) scratch of the stream-K dense kernel (see the header).
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/mxfp4_gemm_small_workspace.h"

namespace mx::cuda {

namespace {

struct Entry {
  float* partials = nullptr;
  size_t partial_bytes = 0;
  int* counters = nullptr;
  int64_t counter_count = 0;
};

std::mutex g_mutex;
std::map<std::pair<int, cudaStream_t>, Entry>& entries() {
  static auto* m = new std::map<std::pair<int, cudaStream_t>, Entry>();  // outlives every caller
  return *m;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MX_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Rounded up so that a slightly bigger shape later reuses the buffer.
size_t round_up(size_t bytes) {
  constexpr size_t kGrain = size_t(1) << 20;
  return (bytes + kGrain - 1) / kGrain * kGrain;
}

}  // namespace

bool streamk_workspace(cudaStream_t stream, size_t partial_bytes, int64_t counters,
                       StreamKWorkspace& out) {
  int device = 0;
  MX_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(g_mutex);
  Entry& e = entries()[{device, stream}];
  const bool grow_partials = partial_bytes > e.partial_bytes;
  const bool grow_counters = counters > e.counter_count;
  if ((grow_partials || grow_counters) && capturing(stream)) return false;
  if (grow_partials) {
    const size_t bytes = round_up(partial_bytes);
    void* p = nullptr;
    MX_CUDA_CHECK(cudaMalloc(&p, bytes));
    e.partials = static_cast<float*>(p);
    e.partial_bytes = bytes;
  }
  if (grow_counters) {
    const size_t bytes = round_up(size_t(counters) * sizeof(int));
    void* p = nullptr;
    MX_CUDA_CHECK(cudaMalloc(&p, bytes));
    // Stream-ordered: zero before any kernel of this stream reads it.
    MX_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
    e.counters = static_cast<int*>(p);
    e.counter_count = int64_t(bytes / sizeof(int));
  }
  out.partials = e.partials;
  out.counters = e.counters;
  return true;
}

}  // namespace mx::cuda
