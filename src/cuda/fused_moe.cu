// Fused MoE: routing ids -> per-expert token lists -> gate_up (+SiLU*up) ->
// down (+weighted combine into FP32 out). Paths (MoeConfig::path, docs/kernels.md):
//   decode, routed: 1. route: one CTA counts (token, slot) pairs per expert,
//      scans, writes each expert's pair list and the list of experts that got
//      any; 2. gate_up: grid (I/8 strips, max active experts), CTAs past the
//      real number of active experts leave at once; each strip holds 8 gate and
//      the matching 8 up rows, so SiLU(gate) * up happens in the epilogue; h is
//      BF16 [pairs, I]; also zeroes `out`; 3. down: grid (H/16 strips / CTA,
//      max active experts); warps split I, meet in shared memory, and add
//      weight * result into out with FP32 atomics;
//   decode, direct (<= 64 pairs): no route launch; CTA y of gate_up/down takes
//      pair y's expert, finds that expert's pairs itself with two ballots, and
//      leaves unless y is the expert's first pair;
//   prefill (fused_moe_prefill.cu): route also cuts each expert's pairs into
//      tiles of 64; gate_up and down run as tensor-core tiles.
// The ring variants stream weights through cp.async rings, and down is
// launched with programmatic dependent launch: its CTAs issue their first
// weight copies while gate_up finishes. Nothing is read back by the host, so
// every path can be captured in a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/fused_moe_decode.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_kernels.h"
#include "cuda/moe_decode_common.cuh"
#include "cuda/moe_tiles.cuh"
#include "cuda/host/moe_path_rule.h"
#include "cuda/w4a4_fp8.h"

namespace mx::cuda {

namespace {

constexpr int kRouteThreads = 1024;
constexpr int kDownWarps = 4;
constexpr int kGateUpWarps = 4;
constexpr int kRingDepth = 8;
// kDepth template value of the bulk-copy weight rings (strip_mma_bulk), and
// their depth in stages of dev::kBulkTiles tiles.
constexpr int kBulkLoads = -1;
constexpr int kBulkStages = 3;
// kDepth template value of register loads issued a whole batch ahead
// (strip_mma_batched).
constexpr int kBatchedLoads = -2;
// The same with 3-tile batches and at most 64 registers per thread, for 8 CTAs
// of 4 warps per SM instead of 6 (4-tile batches spill at 64 registers).
constexpr int kBatchedTightLoads = -3;
constexpr int moe_min_ctas_per_sm(int depth) { return depth == kBatchedTightLoads ? 8 : 1; }
// down with register loads: 8 CTAs of 4 warps per SM (<= 64 registers; ptxas
// took 68 unbounded, which leaves 7).
constexpr int moe_down_min_ctas_per_sm(int depth) { return depth == 0 ? 8 : moe_min_ctas_per_sm(depth); }

// Shared-memory bytes of one warp's weight ring for a kDepth (0: none).
template <int kDepth>
constexpr int warp_ring_bytes() {
  return kDepth == kBulkLoads ? dev::bulk_ring_bytes(kBulkStages)
                              : kDepth > 0 ? dev::ring_bytes(kDepth) : 0;
}

size_t align256(size_t n) { return (n + 255) & ~size_t(255); }

MoeScratch carve(void* ws, int E, int pairs, int topk, int H, int I) {
  char* p = static_cast<char*>(ws);
  auto take = [&](size_t bytes) {
    char* q = p;
    p += align256(bytes);
    return q;
  };
  const int tiles = moe_max_tiles(pairs, E);
  MoeScratch s;
  s.offsets = reinterpret_cast<int*>(take(sizeof(int) * (E + 1)));
  s.sorted_pairs = reinterpret_cast<int*>(take(sizeof(int) * pairs));
  s.active = reinterpret_cast<int*>(take(sizeof(int) * E));
  s.num_active = reinterpret_cast<int*>(take(sizeof(int)));
  s.tile_expert = reinterpret_cast<int*>(take(sizeof(int) * tiles));
  s.tile_start = reinterpret_cast<int*>(take(sizeof(int) * tiles));
  s.num_tiles = reinterpret_cast<int*>(take(sizeof(int)));
  s.block_counts = reinterpret_cast<int*>(take(sizeof(int) * size_t(moe_route_blocks(pairs)) * E));
  s.h = reinterpret_cast<uint16_t*>(take(2 * size_t(pairs) * I));
  s.xq = reinterpret_cast<uint16_t*>(take(2 * size_t(pairs / topk) * H));
  s.xp = reinterpret_cast<uint16_t*>(p);
  return s;
}

// Inclusive block-wide sum over kRouteThreads threads.
__device__ int block_inclusive_scan(int v, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += n;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += n;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const int r = v + (warp > 0 ? warp_sums[warp - 1] : 0);
  __syncthreads();
  return r;
}

// Thread e of the router's CTA with expert e's pair count c: the offsets, the
// active list and, with make_tiles, each expert's pair list cut into tiles
// of 64 for the prefill paths (tile_expert / tile_start / num_tiles).
// Returns expert e's first index into sorted_pairs.
__device__ int route_offsets(int c, int E, const MoeScratch& s, bool make_tiles, int* warp_sums) {
  const int tid = threadIdx.x;
  const int end = block_inclusive_scan(c, warp_sums);
  const int rank = block_inclusive_scan(c > 0 ? 1 : 0, warp_sums);
  if (tid < E) {
    s.offsets[tid + 1] = end;
    if (c > 0) s.active[rank - 1] = tid;
  }
  if (tid == 0) s.offsets[0] = 0;
  if (tid == kRouteThreads - 1) *s.num_active = rank;
  if (make_tiles) {
    const int ntiles = (c + 63) / 64;
    const int tend = block_inclusive_scan(ntiles, warp_sums);
    for (int j = 0; j < ntiles; ++j) {
      s.tile_expert[tend - ntiles + j] = tid;
      s.tile_start[tend - ntiles + j] = end - c + 64 * j;
    }
    if (tid == kRouteThreads - 1) *s.num_tiles = tend;
  }
  return end - c;
}

// Pairs [p0, p1) counted per expert into counts (shared, one per thread;
// zeroed here), the whole CTA.
__device__ void count_pairs(const int* __restrict__ ids, int p0, int p1, int E, int* counts) {
  counts[threadIdx.x] = 0;
  __syncthreads();
  for (int p = p0 + int(threadIdx.x); p < p1; p += kRouteThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
}

// Pairs [p0, p1) into sorted_pairs from each expert's cursor (shared).
__device__ void scatter_pairs(const int* __restrict__ ids, int p0, int p1, int E, const MoeScratch& s, int* cursor) {
  for (int p = p0 + int(threadIdx.x); p < p1; p += kRouteThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) s.sorted_pairs[atomicAdd(&cursor[e], 1)] = p;
  }
}

// The one-CTA router (below kMultiRouteMinPairs pairs): counts, offsets, scatter.
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const int* __restrict__ ids, int pairs, int E, MoeScratch s, bool make_tiles) {
  __shared__ int counts[kRouteThreads];
  __shared__ int cursor[kRouteThreads];
  __shared__ int warp_sums[32];
  count_pairs(ids, 0, pairs, E, counts);
  cursor[threadIdx.x] = route_offsets(counts[threadIdx.x], E, s, make_tiles, warp_sums);
  __syncthreads();
  scatter_pairs(ids, 0, pairs, E, s, cursor);
}

// The multi-CTA router (moe_route_blocks CTAs, each over its slice of the
// pairs): each CTA counts its slice into block_counts[b][e]; one CTA makes
// the offsets and turns block_counts into each slice's first index per
// expert; each CTA scatters its slice from there. Within an expert, pairs
// are in slice order (within a slice in atomic order, as in route_kernel).
__device__ __forceinline__ int route_slice_begin(int pairs, int b) {
  return int(int64_t(pairs) * b / gridDim.x);
}
__global__ void __launch_bounds__(kRouteThreads)
    route_count_kernel(const int* __restrict__ ids, int pairs, int E, MoeScratch s) {
  __shared__ int counts[kRouteThreads];
  const int b = blockIdx.x;
  count_pairs(ids, route_slice_begin(pairs, b), route_slice_begin(pairs, b + 1), E, counts);
  if (int(threadIdx.x) < E) s.block_counts[size_t(b) * E + threadIdx.x] = counts[threadIdx.x];
}
__global__ void __launch_bounds__(kRouteThreads)
    route_offsets_kernel(int blocks, int E, MoeScratch s, bool make_tiles) {
  __shared__ int warp_sums[32];
  const int e = threadIdx.x;
  int c = 0;
  if (e < E)
    for (int b = 0; b < blocks; ++b) c += s.block_counts[size_t(b) * E + e];
  int next = route_offsets(c, E, s, make_tiles, warp_sums);
  if (e < E)
    for (int b = 0; b < blocks; ++b) {
      int& slot = s.block_counts[size_t(b) * E + e];
      const int n = slot;
      slot = next;
      next += n;
    }
}
__global__ void __launch_bounds__(kRouteThreads)
    route_scatter_kernel(const int* __restrict__ ids, int pairs, int E, MoeScratch s) {
  __shared__ int cursor[kRouteThreads];
  const int b = blockIdx.x;
  if (int(threadIdx.x) < E) cursor[threadIdx.x] = s.block_counts[size_t(b) * E + threadIdx.x];
  __syncthreads();
  scatter_pairs(ids, route_slice_begin(pairs, b), route_slice_begin(pairs, b + 1), E, s, cursor);
}

// The pairs sorted by expert (offsets, sorted_pairs, active; with make_tiles
// the 64-pair tile map too).
void launch_router(const int* ids, int pairs, int E, const MoeScratch& s, bool make_tiles, cudaStream_t stream) {
  const int blocks = moe_route_blocks(pairs);
  if (blocks == 0) {
    route_kernel<<<1, kRouteThreads, 0, stream>>>(ids, pairs, E, s, make_tiles);
  } else {
    route_count_kernel<<<blocks, kRouteThreads, 0, stream>>>(ids, pairs, E, s);
    MX_CUDA_CHECK(cudaGetLastError());
    route_offsets_kernel<<<1, kRouteThreads, 0, stream>>>(blocks, E, s, make_tiles);
    MX_CUDA_CHECK(cudaGetLastError());
    route_scatter_kernel<<<blocks, kRouteThreads, 0, stream>>>(ids, pairs, E, s);
  }
  MX_CUDA_CHECK(cudaGetLastError());
}

// kDepth 0: weights through registers (strip_mma); kBatchedLoads: the same,
// a batch's loads issued first; kBulkLoads: a ring filled by bulk copies; else
// a cp.async ring of kDepth tiles.
template <int NT, bool kBig, int kDepth>
__device__ __forceinline__ void moe_strip(const uint8_t* codes, const uint8_t* scales, int kt0,
                                          int kt1, const uint16_t* const (&rows)[NT],
                                          float (&acc)[NT][4], uint8_t* ring, bool wait_prior) {
  if constexpr (kDepth == kBulkLoads)
    dev::strip_mma_bulk<NT, kBig, kBulkStages>(codes, scales, kt0, kt1, rows, acc, ring, wait_prior);
  else if constexpr (kDepth == kBatchedLoads)
    dev::strip_mma_batched<NT, kBig>(codes, scales, kt0, kt1, rows, acc);
  else if constexpr (kDepth == kBatchedTightLoads)
    dev::strip_mma_batched<NT, kBig, 3>(codes, scales, kt0, kt1, rows, acc);
  else if constexpr (kDepth > 0)
    dev::strip_mma_ring<NT, kBig, kDepth>(codes, scales, kt0, kt1, rows, acc, ring, wait_prior);
  else
    dev::strip_mma<NT, kBig>(codes, scales, kt0, kt1, rows, acc);
}

// kGateUpWarps warps split K (H) of one strip.
template <bool kBig, int kDepth, bool kDirect>
__global__ void __launch_bounds__(kGateUpWarps * 32, moe_min_ctas_per_sm(kDepth))
    gate_up_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                   const uint16_t* __restrict__ x, const int* __restrict__ ids, int pairs, int E,
                   int H, int I, int topk, MoeScratch s, float* __restrict__ out,
                   int64_t out_elems) {
  extern __shared__ uint4 dyn_smem[];
  // The down kernel may start its weight copies now (it waits for us before
  // it reads h or touches out).
  dev::griddep_launch_dependents();
  // Zero the combine buffer for the down kernel (stream order makes it safe).
  {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  __shared__ int s_pairs[kDirectMaxPairs], s_meta[2];
  const ExpertPairs ep = find_expert<kDirect>(ids, pairs, E, s, s_pairs, s_meta);
  if (ep.cnt == 0) return;
  __shared__ float partial[kGateUpWarps][4][32];
  const int strip = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int KT = H / kTileK;
  const int kt0 = warp * KT / kGateUpWarps, kt1 = (warp + 1) * KT / kGateUpWarps;
  const size_t tile0 = size_t(ep.e) * (2 * I / kStripRows) * KT + size_t(strip) * KT;
  uint8_t* ring = reinterpret_cast<uint8_t*>(dyn_smem) + warp * warp_ring_bytes<kDepth>();
  for (int c0 = 0; c0 < ep.cnt; c0 += 8) {
    const uint16_t* rows[1] = {c0 + g < ep.cnt ? x + size_t(ep.pairs[c0 + g] / topk) * H : nullptr};
    float acc[1][4] = {};
    moe_strip<1, kBig, kDepth>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                               kt1, rows, acc, ring, false);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[warp][c][lane] = acc[0][c];
    __syncthreads();
    if (threadIdx.x < 64) {
      const int l = threadIdx.x & 31, j = threadIdx.x >> 5;  // token 2t + j
      float gate = 0.f, up = 0.f;
#pragma unroll
      for (int w = 0; w < kGateUpWarps; ++w) {
        gate += partial[w][j][l];
        up += partial[w][j + 2][l];
      }
      const int col = c0 + 2 * (l & 3) + j;
      if (col < ep.cnt) {
        const float silu = gate / (1.f + __expf(-gate));
        s.h[size_t(ep.pairs[col]) * I + strip * 8 + (l >> 2)] = dev::float_to_bf16_bits(silu * up);
      }
    }
    __syncthreads();
  }
}

// CTA = kDownWarps warps = (kDownWarps / kKs) strips x kKs K-slices.
template <int kKs, bool kBig, int kDepth, bool kDirect>
__global__ void __launch_bounds__(kDownWarps * 32, moe_down_min_ctas_per_sm(kDepth))
    down_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                const int* __restrict__ ids, int pairs, int E, int H, int I, int topk, MoeScratch s,
                const float* __restrict__ weights, float* __restrict__ out) {
  extern __shared__ uint4 dyn_smem[];
  constexpr int kSpc = kDownWarps / kKs;
  __shared__ int s_pairs[kDirectMaxPairs], s_meta[2];
  const ExpertPairs ep = find_expert<kDirect>(ids, pairs, E, s, s_pairs, s_meta);
  if (ep.cnt == 0) return;
  __shared__ float partial[kKs][kSpc][4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int s_local = warp % kSpc, slice = warp / kSpc;
  const int strip = blockIdx.x * kSpc + s_local;
  const int KT = I / kTileK;
  const int kt0 = slice * KT / kKs, kt1 = (slice + 1) * KT / kKs;
  const size_t tile0 = size_t(ep.e) * (H / kStripRows) * KT + size_t(strip) * KT;
  uint8_t* ring = reinterpret_cast<uint8_t*>(dyn_smem) + warp * warp_ring_bytes<kDepth>();
  if constexpr (kDepth == 0 || kDepth == kBatchedLoads || kDepth == kBatchedTightLoads)
    dev::griddep_wait();
  for (int c0 = 0; c0 < ep.cnt; c0 += 8) {
    const uint16_t* rows[1] = {c0 + g < ep.cnt ? s.h + size_t(ep.pairs[c0 + g]) * I : nullptr};
    float acc[1][4] = {};
    // h comes from gate_up: the first pass waits for it after issuing its
    // first weight copies.
    moe_strip<1, kBig, kDepth>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                               kt1, rows, acc, ring, c0 == 0);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[slice][s_local][c][lane] = acc[0][c];
    __syncthreads();
    for (int i = threadIdx.x; i < kSpc * 4 * 32; i += kDownWarps * 32) {
      // Entries: kSpc strips x 4 fragment registers x 32 lanes.
      const int sl = i / 128, c = (i >> 5) & 3, l = i & 31;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < kKs; ++k) sum += partial[k][sl][c][l];
      const int col = c0 + 2 * (l & 3) + (c & 1);
      if (col < ep.cnt) {
        const int pair = ep.pairs[col];
        const int row = (blockIdx.x * kSpc + sl) * kStripRows + (l >> 2) + 8 * (c >> 1);
        atomicAdd(out + size_t(pair / topk) * H + row, weights[pair] * sum);
      }
    }
    __syncthreads();
  }
}

// The K-slice choices of the first decode kernels (weight_loads 1-5).
void check_first_decode_slices(const MoeConfig& config, int ks) {
  if (ks != 1 && ks != 4) fail_input("fused_moe_decode: down_k_slices must be 1 or 4, got {}", ks);
  if (config.gate_up_k_slices && config.gate_up_k_slices != kGateUpWarps)
    fail_input("fused_moe_decode: gate_up_k_slices must be {} (8 was measured slower and removed)",
               kGateUpWarps);
}

// MoeConfig::weight_loads of the wide-CTA kernels (fused_moe_decode.cu).
constexpr int kWideLoads = 6;

// W4A4 MMA choice on the prefill paths (MoeConfig::w4a4_mma): BF16 MMAs on
// quantize-dequantized activations unless FP8 is forced. Measured on H200
// (bench/mxfp4/results-w4a4-fp8-2026-11-30.md, run 4): at 8192 Kimi tokens FP8
// 20.71 ms with FP32 every 128 K (rel err 9e-6..1e-3 against the W4A4
// reference across runs) and 19.46 ms every 256 K (1.4e-3..2.9e-3) against
// 20.84 ms for BF16 path 4 (6e-8); at 2048 tokens 10.04 / 9.80 vs 8.68 ms, at
// 512 8.46 / 8.22 vs 6.93. FP8 wins only at 8192 tokens, by 7%, at 1e-3
// error (1.3e-2 with outlier channels): not worth a silent accuracy change.
// Since W4A4 on BF16 runs on path 5 (15.30 ms at 8192 tokens,
// bench/gpu/2026-11-30-session5/w4a4-path5/) FP8 is slower everywhere.
int choose_w4a4_mma(int requested) { return requested ? requested : 1; }

// The auto path: choose_path (cuda/host/moe_path_rule.h).
static_assert(kWsMaxExperts == dev::kMoeMapThreads, "the path rule's expert limit is path 5's tile map's");

template <bool kBig, int kDepth, bool kDirect>
void launch_decode(const MoeWeights& w, const uint16_t* x, const int* ids, const float* topk_weights,
                   int T, int topk, float* out, const MoeScratch& s, cudaStream_t stream, int ks,
                   bool pdl) {
  const int E = w.experts, H = w.hidden, I = w.intermediate, pairs = T * topk;
  const unsigned ys = kDirect ? unsigned(pairs) : unsigned(std::min(E, pairs));
  const int gu_smem = kGateUpWarps * warp_ring_bytes<kDepth>();
  const int down_smem = kDownWarps * warp_ring_bytes<kDepth>();
  launch_with(gate_up_kernel<kBig, kDepth, kDirect>, dim3(unsigned(I / 8), ys), kGateUpWarps * 32,
              gu_smem, stream, LaunchAttrs{}, w.w13_codes, w.w13_scales, x, ids, pairs, E, H, I, topk, s, out,
         int64_t(T) * H);
  quantize_h_for_w4a4(w, s, pairs, stream);
  if (ks == 4)
    launch_with(down_kernel<4, kBig, kDepth, kDirect>, dim3(unsigned(H / kStripRows), ys),
                kDownWarps * 32, down_smem, stream, LaunchAttrs{pdl}, w.w2_codes, w.w2_scales, ids, pairs, E, H, I,
           topk, s, topk_weights, out);
  else
    launch_with(down_kernel<1, kBig, kDepth, kDirect>,
                dim3(unsigned(H / kStripRows / kDownWarps), ys), kDownWarps * 32, down_smem, stream, LaunchAttrs{pdl},
           w.w2_codes, w.w2_scales, ids, pairs, E, H, I, topk, s, topk_weights, out);
}

template <bool kBig, bool kDirect>
void launch_decode_loads(const MoeWeights& w, const uint16_t* x, const int* ids,
                         const float* topk_weights, int T, int topk, float* out, const MoeScratch& s,
                         cudaStream_t stream, int ks, int loads, bool pdl) {
  if (loads == 5)
    launch_decode<kBig, kBatchedTightLoads, kDirect>(w, x, ids, topk_weights, T, topk, out, s, stream, ks, pdl);
  else if (loads == 4)
    launch_decode<kBig, kBatchedLoads, kDirect>(w, x, ids, topk_weights, T, topk, out, s, stream, ks, pdl);
  else if (loads == 3)
    launch_decode<kBig, kBulkLoads, kDirect>(w, x, ids, topk_weights, T, topk, out, s, stream, ks, pdl);
  else if (loads == 2)
    launch_decode<kBig, kRingDepth, kDirect>(w, x, ids, topk_weights, T, topk, out, s, stream, ks, pdl);
  else
    launch_decode<kBig, 0, kDirect>(w, x, ids, topk_weights, T, topk, out, s, stream, ks, pdl);
}

}  // namespace

void quantize_h_for_w4a4(const MoeWeights& w, const MoeScratch& s, int pairs, cudaStream_t stream) {
  // Rows of pairs whose expert id was dropped are never written by gate_up
  // nor read by down; quantizing their stale bytes is harmless.
  if (w.w4a4) mxfp4_qdq_activations(s.h, s.h, pairs, w.intermediate, stream);
}

// The path fused_moe_decode takes (forced or the auto rule) and whether W4A4
// on FP8 tensor cores replaces it (w4a4_mma 2/3 replace the prefill paths;
// the decode paths 1-2 keep BF16 MMAs, so one setting serves every step of a
// server).
namespace {
struct MoeRoute {
  int path;
  bool prefill, fp8;
};
MoeRoute route_of(const MoeWeights& w, int pairs, const MoeConfig& config) {
  MoeRoute r;
  r.path = config.path ? config.path : choose_path(pairs, w.experts, w.hidden, w.intermediate);
  r.prefill = r.path == kPrefillPath || r.path == kWgmmaPath || r.path == kWsPath;
  r.fp8 = w.w4a4 && r.prefill && choose_w4a4_mma(config.w4a4_mma) >= 2;
  return r;
}
}  // namespace

bool fused_moe_rounds_expert_outputs(const MoeWeights& w, int T, int topk, const MoeConfig& config) {
  const MoeRoute r = route_of(w, T * topk, config);
  return r.path == kWsPath && !r.fp8 && moe_prefill_ws_rounds_y(config, T, w.hidden);
}

size_t fused_moe_workspace_bytes(const MoeWeights& w, int max_tokens, int topk) {
  const int pairs = max_tokens * topk;
  const size_t tiles = size_t(moe_max_tiles(pairs, w.experts));
  return align256(sizeof(int) * (w.experts + 1)) + align256(sizeof(int) * pairs) +
         align256(sizeof(int) * w.experts) + 256 + 2 * align256(sizeof(int) * tiles) + 256 +
         align256(sizeof(int) * size_t(moe_route_blocks(pairs)) * w.experts) +
         align256(2 * size_t(pairs) * w.intermediate) + align256(2 * size_t(max_tokens) * w.hidden) +
         2 * size_t(pairs) * w.hidden;  // xp: the warp-specialized path gathers x per pair
}

namespace {

// Every setting is checked before the first launch, so a refused one leaves
// out and the workspace untouched (and nothing half-captured in a graph).
void check_decode_config(const MoeWeights& w, const MoeConfig& config, int path, int T, int pairs, bool wide,
                         int ks) {
  const int I = w.intermediate;
  if (path < kRouted || path > kWsPath)
    fail_input("fused_moe_decode: path must be 1..5, got {}", path);
  if (path == kDirectPath && pairs > kDirectMaxPairs)
    fail_input("fused_moe_decode: the direct path takes <= {} pairs, got {}", kDirectMaxPairs, pairs);
  if (path == kPrefillPath && (2 * I) % 128)
    fail_input("fused_moe_decode: the prefill path needs 2I % 128 == 0, got I={}", I);
  if (path == kWsPath) check_moe_prefill_ws(w, T, pairs, config);
  if (config.weight_loads < 0 || config.weight_loads > kWideLoads || config.pdl < 0 || config.pdl > 2)
    fail_input("fused_moe_decode: weight_loads must be 0..6 and pdl 0..2, got {} and {}",
               config.weight_loads, config.pdl);
  if (wide) check_wide_decode_slices(config.gate_up_k_slices, config.down_k_slices);
  else check_first_decode_slices(config, ks);
  if (config.ws_down_epilogue < 0 || config.ws_down_epilogue > 5 || config.ws_gate_up_depth < 0 ||
      config.ws_gate_up_depth > 2)
    fail_input("fused_moe_decode: ws_down_epilogue must be 0..5 and ws_gate_up_depth 0..2, got {} and {}",
               config.ws_down_epilogue, config.ws_gate_up_depth);
  if (config.w4a4_mma < 0 || config.w4a4_mma > 3)
    fail_input("fused_moe_decode: w4a4_mma must be 0..3, got {}", config.w4a4_mma);
  if (config.ws_ctas < 0) fail_input("fused_moe_decode: ws_ctas must be >= 0, got {}", config.ws_ctas);
  if (config.ws_dequant < 0 || config.ws_dequant > 3)
    fail_input("fused_moe_decode: ws_dequant must be 0..3, got {}", config.ws_dequant);
  if (config.ws_gate_up_items < 0 || config.ws_gate_up_items > 2 ||
      (config.ws_gate_up_items == 2 && config.ws_dequant >= 2))
    fail_input("fused_moe_decode: ws_gate_up_items must be 0..2 (2 with ws_dequant 0 or 1), got {}",
               config.ws_gate_up_items);
  if (config.ws_box_rows < 0 || config.ws_box_rows > 3)
    fail_input("fused_moe_decode: ws_box_rows must be 0..3, got {}", config.ws_box_rows);
  if (config.ws_gate_up_cluster < 0 || config.ws_gate_up_cluster > 2)
    fail_input("fused_moe_decode: ws_gate_up_cluster must be 0..2, got {}", config.ws_gate_up_cluster);
  if (config.ws_down_items < 0 || config.ws_down_items > 3)
    fail_input("fused_moe_decode: ws_down_items must be 0..3, got {}", config.ws_down_items);
}

}  // namespace

void fused_moe_decode(const MoeWeights& w, const uint16_t* x, const int* topk_ids,
                      const float* topk_weights, int T, int topk, float* out, void* workspace,
                      cudaStream_t stream, MoeConfig config) {
  const int E = w.experts, H = w.hidden, I = w.intermediate;
  if (E <= 0 || E > kRouteThreads)
    fail_input("fused_moe_decode: {} experts; the router kernel handles 1..{}", E, kRouteThreads);
  if (H % 128 || I % 64)
    fail_input("fused_moe_decode: H={} must be a multiple of 128 and I={} of 64", H, I);
  if (T <= 0 || topk <= 0) return;
  const int pairs = T * topk;
  const MoeRoute route = route_of(w, pairs, config);
  const int path = route.path;
  // Auto loads, measured (H200; docs/kernels.md "Decode loads" and "MoE decode,
  // wide CTAs"): the wide-CTA kernels (weight_loads 6) on the direct path up to
  // 16 pairs (Kimi 1-2 tokens: 63.0 vs 63.9 us at 1 token, W4A4 65.0 vs 69.7,
  // 2 tokens equal); on the routed path they were not faster (8 and 40 tokens),
  // so register loads (1) stay there.
  const int loads = config.weight_loads                                   ? config.weight_loads
                    : path == kDirectPath && pairs <= kDirectAutoPairs ? kWideLoads
                                                                       : 1;
  const bool pdl = config.pdl ? config.pdl == 1 : pairs <= kDirectAutoPairs;
  const bool wide = loads == kWideLoads;
  const int ks = config.down_k_slices ? config.down_k_slices : (pairs <= 16 ? 4 : 1);
  check_decode_config(w, config, path, T, pairs, wide, ks);
  const MoeScratch s = carve(workspace, E, pairs, topk, H, I);
  // W4A4 on FP8 tensor cores (route_of) quantizes x itself.
  const bool prefill_path = route.prefill, fp8 = route.fp8;
  const int w4a4_mma = choose_w4a4_mma(config.w4a4_mma);
  // The wide direct kernels quantize x themselves (a quantizer launch that
  // gate_up overlaps through PDL) and h in gate_up's epilogue.
  const bool wide_direct = wide && path == kDirectPath;
  // Path 5's phases (MoeConfig::phase_events): events 0 and 1 around the
  // router (W4A4: and x's quantizer).
  const bool phases = config.phase_events && path == kWsPath && !fp8;
  if (phases) MX_CUDA_CHECK(cudaEventRecord(config.phase_events[0], stream));
  if (w.w4a4 && !fp8 && !config.x_quantized && !wide_direct) {  // gate_up reads the quantize-dequantized x on every path
    mxfp4_qdq_activations(x, s.xq, T, H, stream);
    x = s.xq;
  }
  if (path != kDirectPath) {
    launch_router(topk_ids, pairs, E, s, prefill_path, stream);
  }
  if (phases) MX_CUDA_CHECK(cudaEventRecord(config.phase_events[1], stream));
  if (fp8)
    return launch_moe_prefill_fp8(w, x, T, topk, topk_weights, out, s, stream, w4a4_mma == 2 ? 2 : 4);
  if (path == kPrefillPath) return launch_moe_prefill(w, x, T, topk, topk_weights, out, s, stream);
  if (path == kWsPath)
    return launch_moe_prefill_ws(w, x, s.xp, T, topk, topk_weights, out, s, stream, config);
  if (path == kWgmmaPath)
    return launch_moe_prefill_wgmma(w, x, s.xp, T, topk, topk_weights, out, s, stream);
  if (wide) {
    WideDecodeConfig wc;
    wc.direct = path == kDirectPath;
    wc.quantize_x = wide_direct && w.w4a4 && !config.x_quantized;
    wc.gate_up_k_slices = config.gate_up_k_slices;
    wc.down_k_slices = config.down_k_slices;
    wc.pdl = pdl;
    return launch_moe_decode_wide(w, x, topk_ids, topk_weights, T, topk, out, s, stream, wc);
  }
  auto run = [&](auto big) {
    constexpr bool kBig = decltype(big)::value;
    if (path == kDirectPath)
      launch_decode_loads<kBig, true>(w, x, topk_ids, topk_weights, T, topk, out, s, stream, ks, loads, pdl);
    else
      launch_decode_loads<kBig, false>(w, x, topk_ids, topk_weights, T, topk, out, s, stream, ks, loads, pdl);
  };
  if (w.big_scales) run(std::true_type{});
  else run(std::false_type{});
}

}  // namespace mx::cuda
