// Pieces shared by the fused-MoE decode kernels (fused_moe.cu: the first
// gate_up/down kernels and the router; fused_moe_decode.cu: the wide-CTA
// kernels): which expert a CTA works on, and kernel launches with optional
// programmatic dependent launch. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/mxfp4_internal.h"

namespace mx::cuda {

// The direct path's limit: one warp's two ballots see every pair.
constexpr int kDirectMaxPairs = 64;

// The expert a CTA works on and its pairs (global list or shared copy).
struct ExpertPairs {
  int e, cnt;
  const int* pairs;
};

// Routed: CTA y is active expert y. Direct (pairs <= 64): CTA y takes pair y's
// expert if y is that expert's first pair, and collects its pairs with two
// ballots. cnt == 0: nothing to do (uniform over the CTA).
template <bool kDirect>
__device__ __forceinline__ ExpertPairs find_expert(const int* __restrict__ ids, int pairs, int E,
                                                   const MoeScratch& s, int* s_pairs, int* s_meta) {
  if constexpr (!kDirect) {
    const int a = blockIdx.y;
    if (a >= *s.num_active) return {0, 0, nullptr};
    const int e = s.active[a], beg = s.offsets[e];
    return {e, s.offsets[e + 1] - beg, s.sorted_pairs + beg};
  } else {
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x, p = blockIdx.y;
      const int e = ids[p];
      const int e0 = lane < pairs ? ids[lane] : -1, e1 = lane + 32 < pairs ? ids[lane + 32] : -1;
      const unsigned b0 = __ballot_sync(0xffffffffu, e0 == e), b1 = __ballot_sync(0xffffffffu, e1 == e);
      const int first = b0 ? __ffs(b0) - 1 : 31 + __ffs(b1);
      const unsigned below = (1u << lane) - 1u;
      if (e0 == e) s_pairs[__popc(b0 & below)] = lane;
      if (e1 == e) s_pairs[__popc(b0) + __popc(b1 & below)] = lane + 32;
      if (lane == 0) {
        s_meta[0] = e;
        s_meta[1] = (e >= 0 && e < E && first == p) ? __popc(b0) + __popc(b1) : 0;
      }
    }
    __syncthreads();
    return {s_meta[0], s_meta[1], s_pairs};
  }
}

}  // namespace mx::cuda
