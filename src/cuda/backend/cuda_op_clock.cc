#include "cuda/backend/cuda_op_clock.h"

#include "core/error.h"

namespace mx::cuda {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("op clock: {} failed: {}", what, cudaGetErrorString(err));
}

}  // namespace

CudaEventClock::~CudaEventClock() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

int CudaEventClock::record() {
  // The caller may be another thread than the one that built the backend
  // (tensor-parallel ranks, the engine loop).
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (used_ == int(events_.size())) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  check(cudaEventRecord(events_[size_t(used_)], stream_), "cudaEventRecord");
  return used_++;
}

double CudaEventClock::elapsed_ms(int a, int b) {
  if (a < 0 || b < 0 || a >= used_ || b >= used_) fail("op clock: point {} or {} was not recorded", a, b);
  check(cudaEventSynchronize(events_[size_t(b)]), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, events_[size_t(a)], events_[size_t(b)]), "cudaEventElapsedTime");
  return double(ms);
}

}  // namespace mx::cuda
