// CUDA events as an OpClock (ops/op_clock.h): each point is an event recorded
// into the backend's stream, so a difference is GPU time between two points of
// the stream's work, read back without synchronizing until asked.
#pragma once
#include <cuda_runtime_api.h>

#include <vector>

#include "ops/op_clock.h"

namespace mx::cuda {

class CudaEventClock : public OpClock {
 public:
  CudaEventClock(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~CudaEventClock() override;
  CudaEventClock(const CudaEventClock&) = delete;
  CudaEventClock& operator=(const CudaEventClock&) = delete;

  int record() override;
  double elapsed_ms(int a, int b) override;
  void reset() override { used_ = 0; }

 private:
  int device_;
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // reused step after step
  int used_ = 0;
};

}  // namespace mx::cuda
