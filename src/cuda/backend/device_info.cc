#include "cuda/backend/device_info.h"

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace mx::cuda {

DeviceMemoryInfo gpu_memory_info(int device_index) {
  if (cudaError_t err = cudaSetDevice(device_index); err != cudaSuccess)
    fail("GPU {}: cudaSetDevice failed: {}", device_index, cudaGetErrorString(err));
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes); err != cudaSuccess)
    fail("GPU {}: cudaMemGetInfo failed: {}", device_index, cudaGetErrorString(err));
  return {int64_t(free_bytes), int64_t(total_bytes)};
}

}  // namespace mx::cuda
