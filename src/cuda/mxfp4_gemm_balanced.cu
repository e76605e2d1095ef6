// Dense MXFP4 GEMM (W4A16) for 1..16 tokens with each strip's K split over a
// cluster of 2 CTAs (GemmConfig kernel 8, "strip-balanced").
//
// Why: the strip kernels give each 16-row strip one CTA of 8 K-slice warps.
// 7168x18432 has 448 strips for 132 SMs that hold 4 such CTAs each (64
// registers): SMs with 4 CTAs (4 x 288 = 1152 tiles) set the time while the
// mean is 977 tiles (H200, docs/kernels.md "Decode loads"). Here a strip's 8
// K-slice warps sit in 2 CTAs of 4 warps (one cluster): 896 CTAs of half the
// work, at most 7 per SM (1008 tiles), all resident at once (8 per SM fit).
// The two CTAs first sum their 4 warps' partials in shared memory, then each
// sums half of the strip's outputs over both CTAs through distributed shared
// memory (no workspace, no atomics, graph-capturable; as mxfp4_gemm_tiled.cu).
// The weight loads are the strip kernels' (strip_mma_batched: every load of a
// batch issued before the first use; or strip_mma, kernel 1's loop, which
// measured faster at 9..16 tokens).
//
// Tried first (2026-12-01, not kept): a persistent grid of exactly the
// resident clusters of 8 CTAs, each owning up to 8 strips, every warp walking
// an equal part of its K-slice across a strip boundary. Only 62 clusters of 8
// fit at once (GPC sizes), so clusters owned 7 or 8 strips and the largest set
// the time as before, and the per-tile index arithmetic of the boundary
// crossing added a third to the instructions (ncu: 16.8 M vs 12.6 M warp
// instructions): 34.4 vs 27.7 us at 7168x18432, M=1.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_balanced.h"
#include "cuda/mxfp4_gemm_small16_pipe.cuh"

namespace mx::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kCtas = 2;   // CTAs per cluster = per strip
constexpr int kWarps = 4;  // K-slice warps per CTA
constexpr int kThreads = kWarps * 32;
constexpr int entries(int nt) { return nt * 4 * 32; }  // one warp's accumulators

// kU: 1 = strip_mma (kernel 1's loop), else strip_mma_batched with kU-tile
// batches; kU = 0: the pipelined loop with kD tiles in flight through
// per-warp cp.async rings in dynamic shared memory (kernel 12,
// mxfp4_gemm_small16_pipe.cuh). kMinCtas > 1 caps the registers (3-tile
// batches at 64).
template <int NT, bool kBig, int kU, int kMinCtas, int kD = 0>
__global__ void __launch_bounds__(kThreads, kMinCtas)
    dense_split_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y, int prefetch_tiles) {
  constexpr int E = entries(NT);
  __shared__ float part[kWarps][E];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int strip = blockIdx.x / kCtas, rank = blockIdx.x % kCtas;
  const int KT = K / kTileK, slice = rank * kWarps + warp, slices = kCtas * kWarps;
  const int kt0 = slice * KT / slices, kt1 = (slice + 1) * KT / slices;
  const uint16_t* rows[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * 8 + g;
    rows[nt] = token < M ? x + size_t(token) * K : nullptr;
  }
  float acc[NT][4] = {};
  const size_t tile0 = size_t(strip) * KT;
  dev::strip_launch_prologue(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0, kt1,
                             prefetch_tiles);
  if constexpr (kD > 0) {
    extern __shared__ uint4 dyn_smem[];
    dev::pipe_mma<1, NT, kBig, kD>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT, kt0,
                                   kt1, x, M, K, reinterpret_cast<float(&)[1][NT][4]>(acc),
                                   reinterpret_cast<uint8_t*>(dyn_smem) + warp * dev::pipe_ring_bytes<1, NT, kD>());
  } else if constexpr (kU == 1)
    dev::strip_mma<NT, kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                             kt1, rows, acc);
  else
    dev::strip_mma_batched<NT, kBig, kU>(codes + tile0 * kTileCodeBytes,
                                         scales + tile0 * kTileScaleBytes, kt0, kt1, rows, acc);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) part[warp][(nt * 4 + c) * 32 + lane] = acc[nt][c];
  __syncthreads();
  // The CTA's sum, in place in warp 0's row (entry e is only touched by thread e).
  for (int e = threadIdx.x; e < E; e += kThreads) {
    float sum = part[0][e];
#pragma unroll
    for (int k = 1; k < kWarps; ++k) sum += part[k][e];
    part[0][e] = sum;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  // Rank r sums entries [r * E / kCtas, ...) over the cluster and stores them.
  const int e0 = rank * E / kCtas, e1 = (rank + 1) * E / kCtas;
  for (int e = e0 + int(threadIdx.x); e < e1; e += kThreads) {
    float sum = 0.f;
#pragma unroll
    for (int q = 0; q < kCtas; ++q) sum += cluster.map_shared_rank(&part[0][0], q)[e];
    const int idx = e >> 5, l = e & 31, nt = idx >> 2, c = idx & 3;
    const int row = strip * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(sum);
  }
  cluster.sync();  // keep this CTA's partials alive until the other rank has read them
}

template <int NT, bool kBig, int kU, int kMinCtas, int kD>
void launch_variant(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                    cudaStream_t stream, StripLaunch sl) {
  const size_t smem = kD > 0 ? kWarps * dev::pipe_ring_bytes<1, NT, kD>() : 0;  // < 48 KB
  launch_with(dense_split_kernel<NT, kBig, kU, kMinCtas, kD>, dim3(unsigned(w.rows / kStripRows * kCtas)),
              kThreads, smem, stream, LaunchAttrs{sl.pdl, kCtas}, w.codes, w.scales, x, M, int(w.rows),
              int(w.cols), y, sl.prefetch_tiles);
}

template <int NT, int kU, int kMinCtas, int kD = 0>
void launch_scales(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                   cudaStream_t stream, StripLaunch sl) {
  if (w.big_scales) launch_variant<NT, true, kU, kMinCtas, kD>(w, x, M, y, stream, sl);
  else launch_variant<NT, false, kU, kMinCtas, kD>(w, x, M, y, stream, sl);
}

}  // namespace

bool dense_balanced_supported(const Mxfp4DeviceWeight& w) {
  return w.cols >= int64_t(kCtas) * kWarps * kTileK && w.rows >= kStripRows;
}

// Compiled: up to 8 tokens with 3-tile batches at <= 64 registers (8 CTAs of
// 4 warps per SM) or 4-tile batches; 9..16 tokens with kernel 1's loop or
// 3-tile batches. Pipelined (kernel 12, up to 8 tokens): 2 or 3 tiles in
// flight (7 CTAs per SM: 7168x18432's 896 CTAs in one wave; 27 KB of ring per
// CTA at 3).
void launch_dense_balanced(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                           cudaStream_t stream, int batch_tiles, StripLaunch sl, bool pipelined) {
  if (!dense_balanced_supported(w))
    fail_input("mxfp4_gemm: the balanced kernel needs K >= {}, got [{}, {}]", kCtas * kWarps * kTileK,
               w.rows, w.cols);
  if (M < 1 || M > 16) fail_input("mxfp4_gemm: the balanced kernel takes 1..16 tokens, got {}", M);
  if (pipelined) {
    const int d = batch_tiles ? batch_tiles : 2;
    if (M <= 8 && d == 2) return launch_scales<1, 0, 7, 2>(w, x, M, y, stream, sl);
    if (M <= 8 && d == 3) return launch_scales<1, 0, 7, 3>(w, x, M, y, stream, sl);
    fail_input("mxfp4_gemm: no pipelined balanced kernel with {} tiles in flight at {} tokens", d, M);
  }
  if (M <= 8) {
    const int b = batch_tiles ? batch_tiles : 3;
    if (b == 3) return launch_scales<1, 3, 8>(w, x, M, y, stream, sl);
    if (b == 4) return launch_scales<1, 4, 1>(w, x, M, y, stream, sl);
  } else {
    const int b = batch_tiles ? batch_tiles : 1;
    if (b == 1) return launch_scales<2, 1, 1>(w, x, M, y, stream, sl);
    if (b == 3) return launch_scales<2, 3, 1>(w, x, M, y, stream, sl);
  }
  fail_input("mxfp4_gemm: no balanced kernel with {}-tile batches at {} tokens", batch_tiles, M);
}

}  // namespace mx::cuda
