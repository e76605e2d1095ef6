// Device helper shared by the MoE prefill kernels: the pairs of one 64-pair
// tile of the router's tile map.
#pragma once
#include "cuda/mxfp4_internal.h"

namespace mx::cuda::dev {

constexpr int kMoeTilePairs = 64;

// The 64 pairs of tile blockIdx.y (-1 = padding) into s_pair and its expert;
// false (uniformly) when the tile is past the router's count. Ends with a
// barrier.
__device__ __forceinline__ bool load_tile_pairs(const MoeScratch& s, int* s_pair, int& expert) {
  const int y = blockIdx.y;
  if (y >= *s.num_tiles) return false;
  expert = s.tile_expert[y];
  const int start = s.tile_start[y];
  const int cnt = min(kMoeTilePairs, s.offsets[expert + 1] - start);
  if (threadIdx.x < kMoeTilePairs)
    s_pair[threadIdx.x] = threadIdx.x < cnt ? s.sorted_pairs[start + threadIdx.x] : -1;
  __syncthreads();
  return true;
}

}  // namespace mx::cuda::dev
