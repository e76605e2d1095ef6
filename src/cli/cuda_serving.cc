// Registers the GPU's serving pieces when the binary is built with CUDA
// (-DMXSERVE_CUDA=ON): the "cuda" BatchSampler (src/cuda/sampling) and the
// device-memory hook serve uses to size the KV cache
// (--gpu-memory-utilization). In a CPU-only build this file is empty.
#ifdef MXSERVE_HAVE_CUDA
#include "cuda/backend/device_info.h"
#include "cuda/sampling/cuda_batch_sampler.h"
#include "engine/batch_sampler.h"
#include "ops/backend_registry.h"

namespace {

const bool registered = [] {
  mx::register_batch_sampler("cuda", &mx::cuda::make_cuda_batch_sampler);
  mx::set_device_memory_info_hook(&mx::cuda::gpu_memory_info);
  return true;
}();

}  // namespace
#endif
