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

constexpr int kMoeMapThreads = 1024;

namespace {  // a copy per translation unit, like its launches

// Rewrites the tile map (tile_expert / tile_start / num_tiles) into tiles of
// up to kTilePairs pairs of one expert, from the per-expert offsets (the wide
// prefill paths: fused_moe_wgmma.cu, fused_moe_ws.cu). One CTA;
// E <= kMoeMapThreads (the router has the same limit). Launch with one CTA of
// kMoeMapThreads threads.
template <int kTilePairs>
__global__ void __launch_bounds__(kMoeMapThreads) moe_tile_map_kernel(MoeScratch s, int E) {
  __shared__ int warp_sums[kMoeMapThreads / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int count = tid < E ? s.offsets[tid + 1] - s.offsets[tid] : 0;
  const int n = (count + kTilePairs - 1) / kTilePairs;
  int incl = n;  // inclusive scan of n over the block
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += v;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const int end = incl + (warp > 0 ? warp_sums[warp - 1] : 0);
  for (int j = 0; j < n; ++j) {
    s.tile_expert[end - n + j] = tid;
    s.tile_start[end - n + j] = s.offsets[tid] + kTilePairs * j;
  }
  if (tid == kMoeMapThreads - 1) *s.num_tiles = end;
}

}  // namespace

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
