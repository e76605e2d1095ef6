// Registers the CUDA Ops backend with the model layer when the binary is built
// with it (-DMXSERVE_CUDA=ON). In a CPU-only build this file is empty and
// `--device cuda` answers that the build has no CUDA.
#ifdef MXSERVE_HAVE_CUDA
#include "cuda/backend/cuda_ops.h"
#include "ops/kernel_names.h"
#include "ops/backend_registry.h"

namespace {

std::unique_ptr<mx::Ops> make_cuda_backend(const mx::BackendOptions& options) {
  mx::cuda::CudaOpsOptions cuda;
  cuda.device = options.device_index;
  cuda.poison_outputs = options.poison_outputs;
  cuda.f32_activations = options.exact_numerics;
  cuda.attention_kernel = mx::cuda::parse_attention_kernel(options.attention_kernel);
  cuda.mxfp4_gemm_kernel = mx::parse_mxfp4_gemm_kernel(options.mxfp4_gemm_kernel);
  cuda.moe_path = mx::parse_moe_kernel(options.moe_kernel);
  cuda.w4a4_mma = mx::parse_w4a4_mma(options.w4a4_mma);
  return mx::cuda::make_cuda_ops(options.activation_mode, cuda);
}

const bool registered = [] {
  mx::register_ops_backend("cuda", &make_cuda_backend);
  return true;
}();

}  // namespace
#endif
