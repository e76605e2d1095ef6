// Kernel 11's ends of segments (mxfp4_gemm_ws.cu, included by it only): y
// from a warp's accumulators, the stream-K partials of a row block cut
// between CTAs (contributors store and count, the owner waits and sums), and
// the K splits' sum over a cluster.
#pragma once
#include <cooperative_groups.h>

#include <cstdint>

#include "cuda/host/fp8_fold.h"
#include "cuda/host/streamk_ranges.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_ws_ring.cuh"

namespace mx::cuda {
namespace {

namespace cg = cooperative_groups;

// y rows of this warp's strips (m * kW + warp of the row block) from its
// accumulators (tokens < M).
template <int NT, int kSP, int kW>
__device__ __forceinline__ void store_y(const Params& p, int rb, const float (&acc)[kSP][NT / 2]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int m = 0; m < kSP; ++m) {
    const size_t row = (size_t(rb) * kSP * kW + m * kW + warp) * kStripRows + g;
    // FP8: the sums (the activations' factors applied per stage) times the
    // weight rows' unfold factors.
    float wf[2] = {1.f, 1.f};
    if (p.row_smax) wf[0] = fold_unscale(p.row_smax[row]), wf[1] = fold_unscale(p.row_smax[row + 8]);
#pragma unroll
    for (int i = 0; i < NT / 8; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int tk = 8 * i + 2 * t + (c & 1);
        if (tk >= p.M) continue;
        float v = acc[m][4 * i + c];
        if (p.row_smax) v *= wf[c >> 1];
        p.y[size_t(tk) * p.N + row + 8 * (c >> 1)] = dev::float_to_bf16_bits(v);
      }
  }
}

// This warp's kSP x NT / 2 partial sums per lane in CTA `cta`'s slot (a
// contributor stores the part of the row block its range starts in), as
// [float4 i][lane]: each 16-byte store or load of the warp covers 512
// contiguous bytes (lane-major, [lane][i], cost 32 L1 wavefronts per
// instruction instead of 4); kW consumer warps.
template <int kW>
__device__ __forceinline__ float4* partial_slot(const Params& p, int cta, int floats) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return reinterpret_cast<float4*>(p.partials) + (size_t(cta) * kW + warp) * (floats / 4) * 32 + lane;
}

// Stream-K ends of segments (cuda/host/streamk_ranges.h): a whole row block
// goes to y; a contributor's part is stored (store_partial) and counted in a
// segment later (release_partial), when its fence finds the stores done; an
// owner's part waits for the counts and sums (own_row_block). Per warp, no
// CTA barrier. (Session 22, H200, 36864x7168 at 32 tokens: with the last
// arriving CTA summing, every part stored lane-major, fenced and its count's
// atomic waited for, the kernel ran 59.8 us; owners and [float4][lane]
// partials, 52.5; the cut row blocks left out, 49.7: docs/kernels.md.)
template <int NT, int kSP, int kW>
__device__ __forceinline__ void store_partial(const Params& p, const float (&acc)[kSP][NT / 2]) {
  float4* mine = partial_slot<kW>(p, blockIdx.x, kSP * NT / 2);
#pragma unroll
  for (int m = 0; m < kSP; ++m)
#pragma unroll
    for (int i = 0; i < NT / 8; ++i)
      __stcg(mine + (m * NT / 8 + i) * 32,
             make_float4(acc[m][4 * i], acc[m][4 * i + 1], acc[m][4 * i + 2], acc[m][4 * i + 3]));
}

__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

template <int kW>
__device__ __forceinline__ void release_partial(const Params& p, int rb) {
  __syncwarp();  // every lane's partials before lane 0's fence
  int before = 0;
  if ((threadIdx.x & 31) == 0) {
    fence_acq_rel_gpu();
    before = atomicAdd(p.counters + rb * kW + (threadIdx.x >> 5), 1);
  }
  // The count broadcast and tested (it is never negative): after it ptxas
  // takes the code as warp-uniform again; without it, it moved every wgmma
  // descriptor of the next stage loop through R2UR (165 -> 213 instructions).
  if (__shfl_sync(0xffffffffu, before, 0) < 0) __trap();
}

// The owner's part of cut row block rb: waits until the contributors (the
// CTAs after it up to the one holding rb's last unit) counted theirs in, adds
// their partials and writes y, and leaves the counter at zero.
template <int NT, int kSP, int kW>
__device__ __forceinline__ void own_row_block(const Params& p, int rb, int stages, float (&acc)[kSP][NT / 2]) {
  constexpr int kFloats = kSP * NT / 2;
  const int units = (p.N / (kW * kStripRows * kSP)) * stages, ctas = gridDim.x, cta = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int c1 = streamk_cta_of((rb + 1) * stages - 1, units, ctas);
  int* counter = p.counters + rb * kW + (threadIdx.x >> 5);
  // Warp-uniform (the count broadcast from lane 0). The contributors run
  // beside it (a grid of resident CTAs); a count that never comes (counters
  // not left at zero) traps after seconds instead of hanging the stream.
  for (int seen = 0, tries = 0;; ++tries) {
    if (lane == 0) asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    seen = __shfl_sync(0xffffffffu, seen, 0);
    if (seen == c1 - cta) break;
    if (seen > c1 - cta || tries == 1 << 24) __trap();  // counts from another launch sharing the scratch
    __nanosleep(64);
  }
  if (lane == 0) *counter = 0;  // the next launch starts from zero
  __syncwarp();                 // lane 0's acquire before every lane's reads
  for (int c = cta + 1; c <= c1; ++c) {
    const float4* src = partial_slot<kW>(p, c, kFloats);
#pragma unroll
    for (int m = 0; m < kSP; ++m)
#pragma unroll
      for (int i = 0; i < NT / 8; ++i) {
        const float4 v = __ldcg(src + (m * NT / 8 + i) * 32);
        acc[m][4 * i] += v.x, acc[m][4 * i + 1] += v.y, acc[m][4 * i + 2] += v.z, acc[m][4 * i + 3] += v.w;
      }
  }
  store_y<NT, kSP, kW>(p, rb, acc);
}

// The end of segment [seg0, seg1) of row block rb in the CTA's range r. A
// contributor's part is always its range's first segment (row block
// r.u0 / stages, cut when r.u0 % stages != 0); its count goes out at the end
// of the next segment, or of the range when there is none (computed from r,
// not carried in a register: the 64-token loop is at its register cap).
// kMode: the kernel, or a probe that leaves the cut row blocks out.
template <int NT, int kSP, int kW, int kMode>
__device__ __forceinline__ void end_segment(const Params& p, const Range& r, int rb, int seg0, int seg1,
                                            float (&acc)[kSP][NT / 2]) {
  if constexpr (kMode == kRingProbeDropCut || kMode == kRingProbeStoreCut) {
    // Probes: no counts (the counters stay at zero for the next launch).
    if (seg1 - seg0 == r.stages) store_y<NT, kSP, kW>(p, rb, acc);
    else if (kMode == kRingProbeStoreCut) store_partial<NT, kSP, kW>(p, acc);
    return;
  }
  // From an opaque copy of r.u0, so that ptxas does not hoist these out of
  // the segment loop and keep them live across the stage loop (at 64 tokens
  // that spilled inside it).
  const int u0 = int(opaque(uint32_t(r.u0)));
  const int first_rb = u0 / r.stages;
  const bool contributes = u0 % r.stages != 0;  // the first segment is a contributor's
  if (contributes && rb == first_rb + 1) release_partial<kW>(p, first_rb);
  if (seg1 - seg0 == r.stages) {
    if constexpr (kMode != kRingProbeNoWholeY) store_y<NT, kSP, kW>(p, rb, acc);
    return;
  }
  if (seg0 == rb * r.stages) return own_row_block<NT, kSP, kW>(p, rb, r.stages, acc);
  store_partial<NT, kSP, kW>(p, acc);
  if (seg1 == r.u1) release_partial<kW>(p, rb);  // the range ends in its first row block
}

// K splits: the cluster's CTAs sum their FP32 partial tiles through
// distributed shared memory (the ring is free: every stage was consumed).
template <int NT, int kCtas, int kSP>
__device__ __forceinline__ void cluster_epilogue(const Params& p, uint8_t* smem, int rb,
                                                 const float (&acc)[kSP][NT / 2]) {
  using L = Layout<NT, kCtas, kSP>;
  constexpr int kRowsCta = L::kRowsCta;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  __syncthreads();  // every warpgroup's MMAs are done: the ring holds the partial tile now
  float* part = reinterpret_cast<float*>(smem);  // [kRowsCta rows][kPartLd]
#pragma unroll
  for (int m = 0; m < kSP; ++m)
#pragma unroll
    for (int i = 0; i < NT / 8; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        part[((m * kWarps + warp) * kStripRows + g + 8 * (c >> 1)) * L::kPartLd + 8 * i + 2 * t + (c & 1)] =
            acc[m][4 * i + c];
  const size_t row0 = size_t(rb) * kRowsCta;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int splits = int(cluster.num_blocks()), rank = int(cluster.block_rank()), rows_per = kRowsCta / splits;
  for (int e = tid; e < rows_per * p.M; e += kThreads) {
    const int r = rank * rows_per + e % rows_per, tk = e / rows_per;
    float sum = 0.f;
    for (int q = 0; q < splits; ++q) sum += cluster.map_shared_rank(part, q)[r * L::kPartLd + tk];
    p.y[size_t(tk) * p.N + row0 + r] = dev::float_to_bf16_bits(sum);
  }
  cluster.sync();  // keep this CTA's partial alive until every rank has read it
}


}  // namespace
}  // namespace mx::cuda
