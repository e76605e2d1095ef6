// Dense MXFP4 GEMM on wgmma, auto for 17..64 tokens (GemmConfig kernel 7,
// mxfp4_gemm_wgmma.cu); entry points for mxfp4_gemm's dispatch (not public).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

// N % 128 == 0 and K % 256 == 0 (whole batches of 4 K tiles).
bool dense_wgmma_supported(const Mxfp4DeviceWeight& w);

// y[M, N] = x[M, K] * W^T; any M (passes of up to 64 tokens). k_splits: CTAs
// (one cluster) that split K, 1, 2, 4 or 8; 0 = chosen from the shape.
void launch_dense_wgmma(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                        cudaStream_t stream, int k_splits);

}  // namespace mx::cuda
