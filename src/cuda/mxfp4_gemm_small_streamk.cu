// Dense MXFP4 GEMM (W4A16) for 1..16 tokens, stream-K (GemmConfig kernel 10,
// "strip-streamk").
//
// Why: the strip kernels give each strip (or strip pair) a fixed number of
// K-slice warps, so the work per SM is set by how many CTAs land on it. At
// 7168x18432 448 strips x 8 warps give 3 or 4 CTAs per SM (kernel 6) and 896
// half-CTAs at most 7 per SM (kernel 8, SMs active 86% of the elapsed cycles);
// 224 strip pairs (kernel 9, 9..16 tokens) give 1 or 2 CTAs of 8 warps per SM;
// 36864x7168's 1152 pairs are 1.75 waves of kernel 9's CTAs. Here the grid is
// exactly the CTAs that fit at once, and the group x K-tile work units (a
// group = 1 or 2 strips a warp walks together) are cut into one equal,
// contiguous range per warp, across group boundaries: every warp streams the
// same number of tiles, whatever the shape.
//
// A range covers whole groups (stored directly) and at most two partial ones:
// the group it starts in and the group it ends in. A partial group's sums go
// to the warp's slot in an FP32 workspace (slot 0: a segment that starts
// inside its group, which only the range's first can; slot 1: one that starts
// at the group's first tile and ends inside it, which only the range's last
// can); then the warp adds its tile count to the group's
// arrival counter, and the warp that completes the count sums every
// contributor's slot in warp order (deterministic), stores BF16 and resets
// the counter for the next launch. No warp waits for another (the last
// arrival does the sum), so residency is not needed for correctness; no host
// synchronization, graph-capturable. The workspace is per (device, stream):
// mxfp4_gemm_small_workspace.h.
//
// The loop is strip_mma_batched's (every load of a batch issued before its
// first use) for kPair strips at once; a partial batch at the end of a
// segment is one batch with its load addresses clamped to the last tile
// (instead of one tile at a time: each would be a dependent DRAM round trip).
//
// Measured (H200, 2026-12-01, bench/mxfp4/results-dense-small-2026-12-01-s7.md):
// slower than kernels 5, 8 and 9 on every shape, so not chosen by the rule.
// The fix-up is what costs: the same kernel with the fix-up left out (wrong
// sums, timing only) ran 22.9 vs 28.5 us at 7168x18432 M=1 and 26.3-26.8 vs
// 33.0-33.5 at 12-16 tokens. Every warp ends with a partial group, so the
// store, fence, counter atomic and the last arrival's L2 reads sit in a
// chain of dependent global round trips at the very end of the kernel,
// where kernel 8 sums its 2-CTA partials on chip. A lighter fence (lane 0,
// fence.acq_rel.gpu) did not change it (28.9 us). Kept selectable (CLI name
// strip-streamk) as the base for a cheaper fix-up.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_small_streamk.h"
#include "cuda/mxfp4_gemm_small_workspace.h"
#include "cuda/per_device_once.h"

namespace mx::cuda {

namespace {

constexpr int kWarps = 4;  // per CTA: small CTAs fill the SMs evenly
constexpr int kThreads = kWarps * 32;

// One warp's accumulators of one group (floats, fragment order: lane fastest).
template <int NT, int kPair>
constexpr int slot_floats() {
  return kPair * NT * 4 * 32;
}

// The even cut of `units` work units into `warps` contiguous ranges (warps <=
// units, so no range is empty). Units fit in an int (checked at launch): 32-bit
// indices keep the registers of the loop down.
struct Split {
  int units, warps;
  __device__ int begin(int w) const { return int(int64_t(w) * units / warps); }
  // The warp whose range holds unit v: the largest w with begin(w) <= v.
  __device__ int warp_of(int v) const { return int((int64_t(v + 1) * warps + units - 1) / units - 1); }
};

// One batch of kU K tiles of the kPair strips: all loads first, then the MMAs.
// kTail: only n < kU tiles are left; the loads past them re-read the last one.
template <int NT, int kPair, bool kBig, int kU, bool kTail>
__device__ __forceinline__ void group_batch(const uint4* wp, const uint16_t* sp, int wstride,
                                            int sstride, const uint16_t* const (&xrow)[NT], int n,
                                            float (&acc)[kPair][NT][4]) {
  uint4 w[kPair][kU];
  uint32_t sc[kPair][kU];
  uint4 xa[kU][NT][2];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int uu = kTail ? min(u, n - 1) : u;
#pragma unroll
    for (int s = 0; s < kPair; ++s) {
      w[s][u] = dev::load_stream_ordered(wp + s * wstride + uu * 32);
      sc[s][u] = dev::load_u16_ordered(sp + s * sstride + uu * 16);
    }
  }
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int uu = kTail ? min(u, n - 1) : u;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      xa[u][nt][0] = dev::load_act_ordered(xrow[nt] + uu * kTileK);
      xa[u][nt][1] = dev::load_act_ordered(xrow[nt] + uu * kTileK + 8);
    }
  }
  // Keeps every load of the batch before the first MMA (strip_mma_batched).
  __syncwarp();
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    if (kTail && u >= n) break;
#pragma unroll
    for (int s = 0; s < kPair; ++s) dev::mma_tile<NT, kBig>(w[s][u], sc[s][u], xa[u], acc[s]);
  }
}

// Accumulates K tiles [kt0, kt1) of the kPair strips of `group` into acc.
template <int NT, int kPair, bool kBig, int kU>
__device__ __forceinline__ void group_mma(const uint8_t* __restrict__ codes,
                                          const uint8_t* __restrict__ scales,
                                          const uint16_t* __restrict__ x, int M, int K, int group,
                                          int kt0, int kt1, float (&acc)[kPair][NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int KT = K / kTileK;
  const int64_t tile0 = int64_t(group) * kPair * KT;  // the group's first strip, tile 0
  const uint4* wp = reinterpret_cast<const uint4*>(codes) + (tile0 + kt0) * 32 + lane;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales) + (tile0 + kt0) * 16 + (t >> 1) * 8 + g;
  const int wstride = KT * 32, sstride = KT * 16;  // the next strip (uint4 / u16)
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    // Padding tokens read token 0's row (always real): their columns are never stored.
    const int token = nt * 8 + g < M ? nt * 8 + g : 0;
    xrow[nt] = x + size_t(token) * K + kt0 * kTileK + 16 * t;
  }
  int kt = kt0;
  for (; kt + kU <= kt1; kt += kU, wp += kU * 32, sp += kU * 16) {
    group_batch<NT, kPair, kBig, kU, false>(wp, sp, wstride, sstride, xrow, kU, acc);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xrow[nt] += kU * kTileK;
  }
  if (kt < kt1) group_batch<NT, kPair, kBig, kU, true>(wp, sp, wstride, sstride, xrow, kt1 - kt, acc);
}

// Stores a group's sums (fragment order) as BF16 y[token][row].
template <int NT, int kPair>
__device__ __forceinline__ void store_group(const float (&v)[kPair][NT][4], int group, int M,
                                            int N, uint16_t* __restrict__ y) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < kPair; ++s)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = (group * kPair + s) * kStripRows + (lane >> 2) + 8 * (c >> 1);
        const int token = nt * 8 + 2 * (lane & 3) + (c & 1);
        if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(v[s][nt][c]);
      }
}

// A partial group: this warp's sums into its slot, then the arrival; the
// warp that completes the group's KT tiles sums all slots and stores.
template <int NT, int kPair>
__device__ __forceinline__ void finish_partial(const float (&acc)[kPair][NT][4], int slot,
                                               int group, int tiles, int KT, const Split& split,
                                               float* __restrict__ partials, int* __restrict__ counters,
                                               int M, int N, uint16_t* __restrict__ y) {
  constexpr int kSlot = slot_floats<NT, kPair>();
  const int lane = threadIdx.x & 31;
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  float* dst = partials + (size_t(warp) * 2 + slot) * kSlot + lane;
#pragma unroll
  for (int s = 0; s < kPair; ++s)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) dst[((s * NT + nt) * 4 + c) * 32] = acc[s][nt][c];
  __threadfence();  // the slot is visible GPU-wide before the arrival is counted
  __syncwarp();
  int last = 0;
  if (lane == 0) last = atomicAdd(counters + group, tiles) + tiles == KT;
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __syncwarp();  // orders lane 0's atomic before every lane's reads (a shuffle does not)
  __threadfence();
  const int first_unit = group * KT;
  const int w0 = split.warp_of(first_unit), w1 = split.warp_of(first_unit + KT - 1);
  float sum[kPair][NT][4] = {};
  for (int w = w0; w <= w1; ++w) {
    // Only w0 can start at or before the group's first tile (slot 1).
    const int ws = split.begin(w) > first_unit ? 0 : 1;
    const float* src = partials + (size_t(w) * 2 + ws) * kSlot + lane;
#pragma unroll
    for (int s = 0; s < kPair; ++s)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) sum[s][nt][c] += __ldcg(src + ((s * NT + nt) * 4 + c) * 32);
  }
  store_group<NT, kPair>(sum, group, M, N, y);
  if (lane == 0) counters[group] = 0;  // every contributor has arrived: ready for the next launch
}

template <int NT, int kPair, bool kBig, int kU, int kMinCtas>
__global__ void __launch_bounds__(kThreads, kMinCtas)
    dense_streamk_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                         const uint16_t* __restrict__ x, int M, int N, int K,
                         uint16_t* __restrict__ y, float* __restrict__ partials,
                         int* __restrict__ counters, int warps) {
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (warp >= warps) return;  // the last CTA's spare warps (whole warps)
  const int KT = K / kTileK;
  const Split split{N / (kStripRows * kPair) * KT, warps};
  const int u1 = split.begin(warp + 1);
  for (int u = split.begin(warp); u < u1;) {
    const int group = u / KT;
    const int kt0 = u - group * KT;
    const int kt1 = min(KT, u1 - group * KT);
    float acc[kPair][NT][4] = {};
    group_mma<NT, kPair, kBig, kU>(codes, scales, x, M, K, group, kt0, kt1, acc);
    if (kt0 == 0 && kt1 == KT)
      store_group<NT, kPair>(acc, group, M, N, y);
    else
      finish_partial<NT, kPair>(acc, kt0 > 0 ? 0 : 1, group, kt1 - kt0, KT, split, partials,
                                counters, M, N, y);
    u = group * KT + kt1;
  }
}


template <int NT, int kPair, bool kBig, int kU, int kMinCtas>
bool launch_variant(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                    cudaStream_t stream, int ctas_per_sm) {
  auto* kernel = dense_streamk_kernel<NT, kPair, kBig, kU, kMinCtas>;
  static PerDeviceOnce once;
  static int resident_per_sm[64];  // CTAs of this instance that fit one SM, per device
  int device = 0;
  MX_CUDA_CHECK(cudaGetDevice(&device));
  int& fit = resident_per_sm[device & 63];
  once([&] { MX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, kThreads, 0)); });
  const int per_sm = ctas_per_sm > 0 ? std::min(ctas_per_sm, fit) : fit;
  const int KT = int(w.cols / kTileK);
  const int64_t groups = w.rows / (kStripRows * kPair), units = groups * KT;
  if (units > INT32_MAX / 2)
    fail_input("mxfp4_gemm: [{}, {}] has too many tiles for the stream-K kernel", w.rows, w.cols);
  const int warps = int(std::min<int64_t>(int64_t(sm_count()) * std::max(per_sm, 1) * kWarps, units));
  StreamKWorkspace ws;
  const size_t partial_bytes = size_t(warps) * 2 * slot_floats<NT, kPair>() * sizeof(float);
  if (!streamk_workspace(stream, partial_bytes, groups, ws)) return false;
  const unsigned grid = unsigned((warps + kWarps - 1) / kWarps);
  kernel<<<grid, kThreads, 0, stream>>>(w.codes, w.scales, x, M, int(w.rows), int(w.cols), y,
                                         ws.partials, ws.counters, warps);
  MX_CUDA_CHECK(cudaGetLastError());
  return true;
}

template <int NT, int kPair, int kU, int kMinCtas>
bool launch_scales(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                   cudaStream_t stream, int ctas_per_sm) {
  if (w.big_scales) return launch_variant<NT, kPair, true, kU, kMinCtas>(w, x, M, y, stream, ctas_per_sm);
  return launch_variant<NT, kPair, false, kU, kMinCtas>(w, x, M, y, stream, ctas_per_sm);
}

}  // namespace

bool dense_streamk_supported(const Mxfp4DeviceWeight& w, int strips_per_warp) {
  const int pair = strips_per_warp ? strips_per_warp : 2;
  return w.rows > 0 && w.cols >= kTileK && w.rows % (int64_t(kStripRows) * pair) == 0 &&
         (pair == 1 || pair == 2);
}

// Compiled: up to 8 tokens one strip per warp with 3-tile batches at <= 64
// registers or 4-tile batches, or two strips with 1- or 2-tile batches; 9..16
// tokens two strips with 1- or 2-tile batches (the 2-tile pair loop capped at
// 96 registers: 5 CTAs per SM).
bool launch_dense_streamk(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                          cudaStream_t stream, int strips_per_warp, int batch_tiles,
                          int ctas_per_sm) {
  if (M < 1 || M > 16) fail_input("mxfp4_gemm: the stream-K kernel takes 1..16 tokens, got {}", M);
  const int pair = strips_per_warp ? strips_per_warp : (w.rows % 32 == 0 ? 2 : 1);
  if (!dense_streamk_supported(w, pair))
    fail_input("mxfp4_gemm: the stream-K kernel cannot take [{}, {}] with {} strips per warp", w.rows,
               w.cols, pair);
  const int b = batch_tiles ? batch_tiles : pair == 1 ? 3 : 2;
  const int c = ctas_per_sm;
  if (M <= 8) {
    if (pair == 1 && b == 3) return launch_scales<1, 1, 3, 8>(w, x, M, y, stream, c);
    if (pair == 1 && b == 4) return launch_scales<1, 1, 4, 1>(w, x, M, y, stream, c);
    if (pair == 2 && b == 1) return launch_scales<1, 2, 1, 1>(w, x, M, y, stream, c);
    if (pair == 2 && b == 2) return launch_scales<1, 2, 2, 1>(w, x, M, y, stream, c);
  } else {
    if (pair == 2 && b == 1) return launch_scales<2, 2, 1, 1>(w, x, M, y, stream, c);
    if (pair == 2 && b == 2) return launch_scales<2, 2, 2, 5>(w, x, M, y, stream, c);
  }
  fail_input("mxfp4_gemm: no stream-K kernel with {} strips per warp and {}-tile batches at {} tokens",
             pair, b, M);
}

}  // namespace mx::cuda
