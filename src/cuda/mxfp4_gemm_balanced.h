// Dense MXFP4 GEMM for up to 16 tokens with each strip's K split over a
// cluster of 2 CTAs (GemmConfig kernel 8, mxfp4_gemm_balanced.cu); entry points
// for mxfp4_gemm's dispatch (not public).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_internal.h"

namespace mx::cuda {

// K >= 512 (each of a strip's 8 K-slices at least one 64-wide tile).
bool dense_balanced_supported(const Mxfp4DeviceWeight& w);

// y[M, N] = x[M, K] * W^T for 1 <= M <= 16. batch_tiles: weight tiles each warp
// requests before it uses any (1..8 tokens: 3 or 4; 9..16 tokens: 3, or 1 for
// kernel 1's loop; 0 = 3 and 1). pipelined (kernel 12, 1..8 tokens):
// batch_tiles = K tiles whose loads are in flight while one is computed (2 or
// 3; 0 = 2).
void launch_dense_balanced(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                           cudaStream_t stream, int batch_tiles, StripLaunch sl, bool pipelined = false);

}  // namespace mx::cuda
