// Dense MXFP4 GEMM (W4A16) for 9..16 tokens with two 16-row strips per warp
// (GemmConfig kernel 9, "strip-pair").
//
// Why: at 9..16 tokens the strip kernels load two token groups of activations
// per K tile (4 x 16-byte loads per lane, each touching 8 rows = 8 L1
// wavefronts) against one 512-byte weight tile (4 wavefronts): 37 L1
// wavefronts per tile instead of 21 at 8 tokens; 36864x7168 took 65 us at 16
// tokens (kernel 1) against 39 at 8 (kernel 5) on an H200 (2026-12-01). Here
// each warp walks the same K-slice of two neighbouring strips and feeds each
// activation load to both strips' MMAs: 21 wavefronts and about the same
// instructions per tile as at 8 tokens (46.5 us at 16 tokens; ncu: L1 51%
// busy instead of 73%). CTA = one strip pair x kKs K-slice warps, partial sums
// meet in shared memory as in the strip kernels. Loads as strip_mma_batched:
// every load of a batch of kU K tiles (of both strips) is issued before the
// first use.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_pair.h"
#include "cuda/mxfp4_gemm_small16_pipe.cuh"
#include "cuda/per_device_once.h"

namespace mx::cuda {

namespace {

constexpr int kPair = 2;  // strips per warp

// Batches per trip of pair_mma's loop (its unroll count). 2 with 8 K-slices
// and 2-tile batches: with one batch per trip ptxas stepped the six 64-bit
// pointers (both strips' weights and scales, both token groups' rows) with
// add pairs and rotated them through register moves: 23 of the loop's 295
// instructions per batch went to pointers and loop control (SASS of 4ebd597,
// scripts/sass_loops.py), 12 of 284 unrolled. H200, same call (session 19's
// call 2): 7168x18432 at 12 / 16 tokens 24.1 / 24.7 us against 26.3-26.4 /
// 26.7-27.0, MLA o_proj at 16 tokens 12.1 vs 13.0
// (bench/mxfp4/results-dense-small-2026-12-03-s19.md). Not with 4 K-slices
// (36864x7168): 102 registers instead of 92 leave 4 CTAs per SM instead of 5
// (call 1: 50.7-50.9 us at 12 tokens against 47.5-47.6); capped at 5 CTAs, it
// spills inside the loop.
template <int kKs, int kU>
constexpr int kPairTrip = kKs == 8 && kU == 2 ? 2 : 1;

// Accumulates K tiles [kt0, kt1) of strips 0 and 1 of the pair (tiles of strip
// 1 follow strip 0's KT tiles) into acc[0] and acc[1], sharing each
// activation load between them.
template <int NT, bool kBig, int kU, int kTrip>
__device__ __forceinline__ void pair_mma(const uint8_t* __restrict__ codes,
                                         const uint8_t* __restrict__ scales, int KT, int kt0,
                                         int kt1, const uint16_t* const (&rows)[NT],
                                         float (&acc)[kPair][NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4* wp = reinterpret_cast<const uint4*>(codes) + lane + kt0 * 32;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales) + (t >> 1) * 8 + g + kt0 * 16;
  const int wstride = KT * 32, sstride = KT * 16;  // strip 1 after strip 0 (uint4 / u16)
  // Padding tokens read lane 0's row (a real token): their columns are never stored.
  const uint16_t* real = reinterpret_cast<const uint16_t*>(
      __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(rows[0]), 0));
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = (rows[nt] ? rows[nt] : real) + kt0 * kTileK + 16 * t;
  int kt = kt0;
#pragma unroll(kTrip)
  for (; kt + kU <= kt1; kt += kU, wp += kU * 32, sp += kU * 16) {
    uint4 w[kPair][kU];
    uint32_t sc[kPair][kU];
    uint4 xa[kU][NT][2];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int s = 0; s < kPair; ++s) {
        w[s][u] = dev::load_stream_ordered(wp + s * wstride + u * 32);
        sc[s][u] = dev::load_u16_ordered(sp + s * sstride + u * 16);
      }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xa[u][nt][0] = dev::load_act_ordered(xrow[nt] + u * kTileK);
        xa[u][nt][1] = dev::load_act_ordered(xrow[nt] + u * kTileK + 8);
      }
    // Keeps every load of the batch before the first MMA (strip_mma_batched).
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int s = 0; s < kPair; ++s) dev::mma_tile<NT, kBig>(w[s][u], sc[s][u], xa[u], acc[s]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xrow[nt] += kU * kTileK;
  }
  for (; kt < kt1; ++kt, wp += 32, sp += 16) {
    uint4 xa[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      xa[nt][0] = dev::load_act(xrow[nt]);
      xa[nt][1] = dev::load_act(xrow[nt] + 8);
      xrow[nt] += kTileK;
    }
#pragma unroll
    for (int s = 0; s < kPair; ++s)
      dev::mma_tile<NT, kBig>(dev::load_stream(wp + s * wstride), __ldg(sp + s * sstride), xa, acc[s]);
  }
}

// kD = 0: pair_mma with kU-tile batches (kernel 9); kD > 0: the pipelined loop
// with kD tiles in flight through per-warp cp.async rings in dynamic shared
// memory (kernel 12, mxfp4_gemm_small16_pipe.cuh), which then hold the partial
// sums.
template <int NT, bool kBig, int kKs, int kU, int kD>
__global__ void __launch_bounds__(kKs * 32)
    dense_pair_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y, int prefetch_tiles) {
  constexpr int E = NT * 4 * 32;  // one strip's accumulators in a warp
  extern __shared__ uint4 dyn_smem[];
  __shared__ float part_static[kD > 0 ? 1 : kKs][kPair][E];
  using Part = float[kPair][E];
  Part* part = kD > 0 ? reinterpret_cast<Part*>(dyn_smem) : part_static;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int KT = K / kTileK, strip0 = blockIdx.x * kPair;
  const int kt0 = warp * KT / kKs, kt1 = (warp + 1) * KT / kKs;
  const uint16_t* rows[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * 8 + g;
    rows[nt] = token < M ? x + size_t(token) * K : nullptr;
  }
  float acc[kPair][NT][4] = {};
  const size_t tile0 = size_t(strip0) * KT;
  // Both strips' first tiles asked of the L2 before the wait (strip 1 follows strip 0's KT tiles).
  dev::prefetch_strip_tiles(codes + (tile0 + KT) * kTileCodeBytes, scales + (tile0 + KT) * kTileScaleBytes, kt0,
                            kt1, prefetch_tiles);
  dev::strip_launch_prologue(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0, kt1,
                             prefetch_tiles);
  if constexpr (kD > 0) {
    dev::pipe_mma<kPair, NT, kBig, kD>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT,
                                       kt0, kt1, x, M, K, acc,
                                       reinterpret_cast<uint8_t*>(dyn_smem) + warp * dev::pipe_ring_bytes<kPair, NT, kD>());
    __syncthreads();  // every warp is done with its ring: it holds the partial sums now
  } else {
    pair_mma<NT, kBig, kU, kPairTrip<kKs, kU>>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes,
                                               KT, kt0, kt1, rows, acc);
  }
#pragma unroll
  for (int s = 0; s < kPair; ++s)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) part[warp][s][(nt * 4 + c) * 32 + lane] = acc[s][nt][c];
  __syncthreads();
  for (int e = threadIdx.x; e < kPair * E; e += kKs * 32) {
    const int s = e / E, i = e % E;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kKs; ++k) sum += part[k][s][i];
    const int idx = i >> 5, l = i & 31, nt = idx >> 2, c = idx & 3;
    const int row = (strip0 + s) * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(sum);
  }
}

template <int kKs, int kU, int kD = 0>
void launch_variant(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                    cudaStream_t stream, StripLaunch sl) {
  const unsigned grid = unsigned(w.rows / (kStripRows * kPair));
  constexpr int kSmem = kD > 0 ? kKs * dev::pipe_ring_bytes<kPair, 2, kD>() : 0;
  static_assert(kSmem == 0 || kSmem >= kKs * kPair * 2 * 4 * 32 * 4, "the ring holds the partial sums");
  auto* kernel = w.big_scales ? dense_pair_kernel<2, true, kKs, kU, kD> : dense_pair_kernel<2, false, kKs, kU, kD>;
  if constexpr (kSmem > 48 * 1024) {
    static PerDeviceOnce smem_attribute;
    smem_attribute([] {
      for (auto* k : {dense_pair_kernel<2, true, kKs, kU, kD>, dense_pair_kernel<2, false, kKs, kU, kD>})
        MX_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    });
  }
  launch_with(kernel, dim3(grid), kKs * 32, kSmem, stream, LaunchAttrs{sl.pdl, 1}, w.codes, w.scales, x, M,
              int(w.rows), int(w.cols), y, sl.prefetch_tiles);
}

}  // namespace

bool dense_pair_supported(const Mxfp4DeviceWeight& w, int k_slices) {
  return w.rows % (kStripRows * kPair) == 0 && w.rows > 0 && w.cols >= int64_t(kTileK) * k_slices;
}

// Compiled: 4 or 8 K-slice warps per pair, batches of 1 or 2 K tiles (2 or 4
// weight tiles in flight per warp); pipelined: 2 or 3 K tiles in flight.
// Tried and removed (session 20, code at b760583): batches of 4 K tiles of
// weights with each tile's activations loaded just before its dequant (twice
// the weight bytes in flight per warp), 11-16% slower on the large weights
// (bench/mxfp4/results-pipes-2026-12-03-s20.md).
void launch_dense_pair(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream, int k_slices, int batch_tiles, StripLaunch sl, bool pipelined) {
  const int ks = k_slices ? k_slices : 4, b = batch_tiles ? batch_tiles : 2;
  if (M < 9 || M > 16) fail_input("mxfp4_gemm: the strip-pair kernel takes 9..16 tokens, got {}", M);
  if (!dense_pair_supported(w, ks))
    fail_input("mxfp4_gemm: the strip-pair kernel needs N % 32 == 0 and K >= {}, got [{}, {}]",
               kTileK * ks, w.rows, w.cols);
  if (pipelined) {
    if (ks == 4 && b == 2) return launch_variant<4, 1, 2>(w, x, M, y, stream, sl);
    if (ks == 4 && b == 3) return launch_variant<4, 1, 3>(w, x, M, y, stream, sl);
    if (ks == 8 && b == 2) return launch_variant<8, 1, 2>(w, x, M, y, stream, sl);
    if (ks == 8 && b == 3) return launch_variant<8, 1, 3>(w, x, M, y, stream, sl);
    fail_input("mxfp4_gemm: no pipelined strip-pair kernel with {} K-slices and {} tiles in flight", ks, b);
  }
  if (ks == 4 && b == 1) return launch_variant<4, 1>(w, x, M, y, stream, sl);
  if (ks == 4 && b == 2) return launch_variant<4, 2>(w, x, M, y, stream, sl);
  if (ks == 8 && b == 1) return launch_variant<8, 1>(w, x, M, y, stream, sl);
  if (ks == 8 && b == 2) return launch_variant<8, 2>(w, x, M, y, stream, sl);
  fail_input("mxfp4_gemm: no strip-pair kernel with {} K-slices and {}-tile batches", ks, b);
}

}  // namespace mx::cuda
