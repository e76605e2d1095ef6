// Dense MXFP4 GEMM for 9..16 tokens with two strips per warp sharing the
// activation loads (GemmConfig kernel 9, mxfp4_gemm_pair.cu); entry points for
// mxfp4_gemm's dispatch (not public).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_internal.h"

namespace mx::cuda {

// N % 32 == 0 (whole strip pairs) and K >= 64 * k_slices.
bool dense_pair_supported(const Mxfp4DeviceWeight& w, int k_slices);

// y[M, N] = x[M, K] * W^T for 9 <= M <= 16. k_slices: warps per strip pair,
// each a slice of K (4 or 8; 0 = 4). batch_tiles: K tiles (of both strips)
// each warp requests before it uses any (1 or 2; 0 = 2). pipelined (kernel
// 12): batch_tiles = K tiles whose loads are in flight while one is computed
// (2 or 3; 0 = 2).
void launch_dense_pair(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream, int k_slices, int batch_tiles, StripLaunch sl, bool pipelined = false);

}  // namespace mx::cuda
