// --dense-small probe (issue #8, session 8): does kernel 9 gain from
// activations stored in its B-fragment order? Kernel 9 (strip pairs, 9..16
// tokens) loads each lane's 32 activation bytes per token group and K tile
// as two 16-byte loads that each touch 8 token rows (8 L1 wavefronts; 32 per
// tile for two groups against 8 for the two strips' weights). Here x is first
// rewritten so that the 32 lanes' 16 bytes of a (tile, group, half) are 512
// contiguous bytes (one 4-wavefront access); the same pair loop then reads
// it. Rows: the GEMM alone on x permuted outside the timed region (an upper
// bound of the idea) and the permutation plus the GEMM launched with
// programmatic dependent launch (what a library version would cost).
// Non-big-scale weights, N % 32 == 0, K >= 64 * k_slices, 9..16 tokens.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/mxfp4_kernels.h"

namespace mxbench {

// Bytes of the permuted x of up to 16 tokens.
size_t permuted_x_bytes(int64_t K);

// xp (permuted_x_bytes(K), 16-byte aligned) = x [M, K] in the pair loop's
// B-fragment order; rows M..15 are zeros.
void permute_x_for_pairs(const uint16_t* x, int M, int64_t K, uint4* xp, cudaStream_t s);

// y [M, N] = x W^T from the permuted x with kernel 9's loop; k_slices 4 or 8.
// pdl: launched with programmatic dependent launch after permute_x_for_pairs.
void pair_gemm_on_permuted_x(const mx::cuda::Mxfp4DeviceWeight& w, const uint4* xp, int M, uint16_t* y,
                             int k_slices, bool pdl, cudaStream_t s);

}  // namespace mxbench
