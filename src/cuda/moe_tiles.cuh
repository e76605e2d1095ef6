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

// Wide tiles of the wgmma prefill path (fused_moe_wgmma.cu): up to 256 pairs
// of one expert, rewritten from the offsets into the same tile_expert /
// tile_start / num_tiles arrays (their capacity, moe_max_tiles, covers these).
constexpr int kMoeWideTilePairs = 256;

inline int moe_max_wide_tiles(int pairs, int experts) {
  return pairs / kMoeWideTilePairs + experts + 1;
}

// Pairs [first, first + max_pairs) of wide tile `tile` into s_pair (max_pairs
// entries, -1 = padding), its expert and how many are real; false (uniformly)
// when the tile is past the map's count or has no pair there. Ends with a
// barrier.
__device__ __forceinline__ bool load_wide_tile_pairs(const MoeScratch& s, int tile, int first,
                                                     int max_pairs, int* s_pair, int& expert,
                                                     int& count) {
  if (tile >= *s.num_tiles) return false;
  expert = s.tile_expert[tile];
  const int start = s.tile_start[tile] + first;
  count = min(min(max_pairs, kMoeWideTilePairs - first), s.offsets[expert + 1] - start);
  if (count <= 0) return false;
  for (int i = threadIdx.x; i < max_pairs; i += blockDim.x)
    s_pair[i] = i < count ? s.sorted_pairs[start + i] : -1;
  __syncthreads();
  return true;
}

}  // namespace mx::cuda::dev

namespace mx::cuda {

// down of the prefill tiles (fused_moe_prefill.cu): the mma.sync kernel over
// the router's 64-pair tile map, h (BF16 [pairs, I]) in natural column order,
// out += weight * y. Also the down step of the wgmma path (fused_moe_wgmma.cu).
void launch_moe_prefill_down(const MoeWeights& w, int T, int topk, const float* topk_weights,
                             float* out, const MoeScratch& s, cudaStream_t stream);

}  // namespace mx::cuda
