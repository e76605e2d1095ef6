// Device-resident tensors of the CUDA backend. A Tensor whose Storage is a
// DeviceStorage holds a GPU pointer (Tensor::raw() must then never be
// dereferenced on the host). Activations are allocated stream-ordered from the
// device's memory pool (cudaMallocAsync; freed with cudaFreeAsync when the last
// view dies), so a step's many short-lived tensors cost no cudaMalloc/cudaFree
// synchronization; long-lived buffers (weights, KV cache) use cudaMalloc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor.h"

namespace mx::cuda {

// Throws mx::Error "CUDA backend, op <op>: <what> failed: <cuda error>".
void check_cuda(cudaError_t err, const char* op, const char* what);

class DeviceStorage : public Storage {
 public:
  enum class Kind { StreamOrdered, Persistent };
  DeviceStorage(size_t bytes, Kind kind, cudaStream_t stream, const char* op);
  ~DeviceStorage() override;
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;

  uint8_t* data() override { return ptr_; }
  size_t size() const override { return bytes_; }
  Device device() const override { return Device::CUDA; }

 private:
  uint8_t* ptr_ = nullptr;
  size_t bytes_ = 0;
  Kind kind_;
  cudaStream_t stream_;
};

// Once per device: keep freed pool memory cached instead of returning it to
// the driver at every synchronization.
void configure_memory_pool(int device);

// A fresh device tensor (stream-ordered). poison: fill it with 0xFF bytes (NaN
// in F32/BF16) so an element a kernel forgets to write shows up in parity tests.
Tensor device_empty(DType dtype, Shape shape, cudaStream_t stream, bool poison = false);
// A long-lived device tensor (cudaMalloc), zero-filled.
Tensor device_persistent(DType dtype, Shape shape, const char* what);

inline bool on_device(const Tensor& t) { return t.defined() && t.device() == Device::CUDA; }

// Throws mx::Error when `stream` is capturing a CUDA graph (step_graphs.h): a
// copy of host data the step did not prepare cannot be part of a recording.
void require_not_capturing(cudaStream_t stream, const char* op);

// Host <-> device copies on `stream` (copy_to_device refuses a capturing
// stream). to_host waits for the stream.
Tensor copy_to_device(const Tensor& host, cudaStream_t stream);
Tensor copy_to_host(const Tensor& device, cudaStream_t stream);

}  // namespace mx::cuda
