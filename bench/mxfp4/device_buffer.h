// Device memory and CUDA error checks shared by the MXFP4 bench's parts.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace mxbench {

inline void check_cuda_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A CUDA call checked with its own text as the message (inside namespace mxbench).
#define CK(x) check_cuda_call((x), #x)

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count = 0) { resize(count); }
  void resize(size_t count) {
    if (p) cudaFree(p);
    p = nullptr;
    n = count;
    if (count) check_cuda_call(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() { if (p) cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> download() const {
    std::vector<T> h(n);
    // The bench streams are non-blocking: a plain cudaMemcpy would not wait for them.
    check_cuda_call(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check_cuda_call(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
  void upload(const std::vector<T>& h) {
    check_cuda_call(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
};

}  // namespace mxbench
