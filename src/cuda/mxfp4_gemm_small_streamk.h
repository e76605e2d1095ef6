// Dense MXFP4 GEMM for 1..16 tokens, stream-K (GemmConfig kernel 10,
// mxfp4_gemm_small_streamk.cu); entry points for mxfp4_gemm's dispatch (not
// public).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

// Strips per warp 1, or 2 with N % 32 == 0.
bool dense_streamk_supported(const Mxfp4DeviceWeight& w, int strips_per_warp);

// y[M, N] = x[M, K] * W^T for 1 <= M <= 16. strips_per_warp: 16-row strips a
// warp walks together, sharing each activation load (1 or 2; 0 = 2 where N %
// 32 == 0). batch_tiles: K tiles a warp requests before it uses any (1 strip:
// 3 (at most 64 registers) or 4; 2 strips: 1 or 2; 0 = 3 and 2). ctas_per_sm:
// resident CTAs per SM to use (0 = as many as fit). Returns false (nothing
// launched) when the per-stream scratch is too small and the stream is being
// captured (mxfp4_gemm_small_workspace.h); the caller runs another kernel.
bool launch_dense_streamk(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                          cudaStream_t stream, int strips_per_warp, int batch_tiles,
                          int ctas_per_sm);

}  // namespace mx::cuda
