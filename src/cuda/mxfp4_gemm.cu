// Dense MXFP4 GEMM for decode shapes (W4A16): one CTA per 16-row strip, its
// warps split K, partial sums meet in shared memory. Weights are the A operand
// of mma.m16n8k16 (16 rows), tokens the N operand (8 per MMA), so M = 1 wastes
// MMA lanes but not memory traffic, which is what decode is bound by.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_balanced.h"
#include "cuda/mxfp4_gemm_pair.h"
#include "cuda/mxfp4_gemm_small_streamk.h"
#include "cuda/mxfp4_gemm_wgmma.h"
#include "cuda/mxfp4_gemm_ws.h"
#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

// Row pointers of the NT token groups lane group g multiplies (token nt*8 + g;
// null past M: the strip loops feed zeros or a real row for those).
template <int NT>
__device__ __forceinline__ void token_rows(const uint16_t* x, int M, int K, int g, const uint16_t* (&rows)[NT]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * 8 + g;
    rows[nt] = token < M ? x + size_t(token) * K : nullptr;
  }
}

constexpr int kMaxTokensPerPass = 64;

// Shared-memory ring depth (tiles in flight per warp) of the cp.async kernel
// variant: 8 up to 8 warps per CTA (40 KB), 4 for 16 warps.
constexpr int ring_depth(int warps) { return warps <= 8 ? 8 : 4; }

// CTA = kSpc strips x kKs K-slices (one warp each). Warps of the same K-slice
// read the same activations at about the same time, so with many tokens the
// activations come from L1 kSpc times less often; the K-slices meet in shared
// memory. kDepth = 0: weights loaded into registers 4 tiles at a time
// (strip_mma); kBatched: the same with every load of a batch issued before
// its first use (strip_mma_batched); kDepth > 0: streamed through a per-warp
// cp.async ring (strip_mma_ring), whose space then holds the warp's partial sums.
constexpr int kBatched = -2;
// kBatched with batches of 3 tiles and at most 64 registers per thread (kernel
// 6): 32 warps per SM instead of 24, so that 448 CTAs of 8 warps fit in one
// wave (4-tile batches spill at 64 registers).
constexpr int kBatchedTight = -3;
constexpr int min_ctas_per_sm(int depth, int threads) {
  return depth == kBatchedTight ? 65536 / (64 * threads) : 1;
}
template <int NT, int kSpc, int kKs, bool kBig, int kDepth>
__global__ void __launch_bounds__(kSpc * kKs * 32, min_ctas_per_sm(kDepth, kSpc * kKs * 32))
    dense_gemm_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y, int prefetch_tiles) {
  extern __shared__ uint4 dyn_smem[];
  constexpr int kPartialBytes = NT * 4 * 32 * 4;  // one warp's accumulators
  constexpr int kRegionBytes = kDepth > 0 ? dev::ring_bytes(kDepth) : kPartialBytes;
  static_assert(kRegionBytes >= kPartialBytes, "ring too small for the partial sums");
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int s_local = warp % kSpc, slice = warp / kSpc;
  const int strip = blockIdx.x * kSpc + s_local;
  const int g = lane >> 2;
  const int KT = K / kTileK;
  const int kt0 = slice * KT / kKs, kt1 = (slice + 1) * KT / kKs;

  const uint16_t* rows[NT];
  token_rows<NT>(x, M, K, g, rows);
  float acc[NT][4] = {};
  const size_t tile0 = size_t(strip) * KT;
  dev::strip_launch_prologue(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0, kt1,
                             prefetch_tiles);
  uint8_t* region = smem + warp * kRegionBytes;
  if constexpr (kDepth > 0)
    dev::strip_mma_ring<NT, kBig, kDepth>(codes + tile0 * kTileCodeBytes,
                                          scales + tile0 * kTileScaleBytes, kt0, kt1, rows, acc,
                                          region);
  else if constexpr (kDepth == kBatched || kDepth == kBatchedTight)
    dev::strip_mma_batched<NT, kBig, kDepth == kBatched ? 4 : 3>(codes + tile0 * kTileCodeBytes,
                                     scales + tile0 * kTileScaleBytes, kt0, kt1, rows, acc);
  else
    dev::strip_mma<NT, kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                             kt1, rows, acc);
  // The warp's own ring is idle once every lane has left the loop (each lane
  // waited for its own copies; the partials below overwrite other lanes' slots).
  __syncwarp();
  float* mine = reinterpret_cast<float*>(region);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) mine[(nt * 4 + c) * 32 + lane] = acc[nt][c];
  __syncthreads();
  for (int e = threadIdx.x; e < kSpc * NT * 4 * 32; e += kSpc * kKs * 32) {
    const int sl = e / (NT * 4 * 32), i = (e >> 5) % (NT * 4), l = e & 31;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kKs; ++k)
      sum += reinterpret_cast<const float*>(smem + (k * kSpc + sl) * kRegionBytes)[i * 32 + l];
    const int nt = i >> 2, c = i & 3;
    const int row = (blockIdx.x * kSpc + sl) * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(sum);
  }
}

template <int NT, int kSpc, int kKs, bool kBig, int kDepth>
void launch_dense_variant(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                          cudaStream_t stream, StripLaunch sl) {
  constexpr int kWarps = kSpc * kKs;
  constexpr int kRegion = kDepth > 0 ? dev::ring_bytes(kDepth) : NT * 4 * 32 * 4;
  constexpr int kSmem = kWarps * kRegion;
  auto* kernel = dense_gemm_kernel<NT, kSpc, kKs, kBig, kDepth>;
  if constexpr (kSmem > 48 * 1024) {
    static PerDeviceOnce smem_attribute;
    smem_attribute([&] { MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem)); });
  }
  const int N = int(w.rows), K = int(w.cols);
  launch_with(kernel, dim3(unsigned(N / kStripRows / kSpc)), kWarps * 32, kSmem, stream, LaunchAttrs{sl.pdl, 1},
              w.codes, w.scales, x, M, N, K, y, sl.prefetch_tiles);
}

// How the strip kernels load weights: GemmConfig kernel 1, 2 and 5.
enum class Loads { kRegisters, kRing, kBatched, kBatchedTight };

template <int NT, int kSpc, int kKs>
void launch_dense(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                  cudaStream_t stream, Loads loads, StripLaunch sl) {
  if ((w.rows / kStripRows) % kSpc)
    fail_input("mxfp4_gemm: {} strips of 16 rows do not split into CTAs of {}", w.rows / kStripRows, kSpc);
  constexpr int kDepth = ring_depth(kSpc * kKs);
  if (loads == Loads::kRing) {
    if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, kDepth>(w, x, M, y, stream, sl);
    else launch_dense_variant<NT, kSpc, kKs, false, kDepth>(w, x, M, y, stream, sl);
  } else if (loads == Loads::kBatched) {
    if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, kBatched>(w, x, M, y, stream, sl);
    else launch_dense_variant<NT, kSpc, kKs, false, kBatched>(w, x, M, y, stream, sl);
  } else if (loads == Loads::kBatchedTight) {
    if constexpr (NT == 1) {
      if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, kBatchedTight>(w, x, M, y, stream, sl);
      else launch_dense_variant<NT, kSpc, kKs, false, kBatchedTight>(w, x, M, y, stream, sl);
    } else {
      fail_input("mxfp4_gemm: kernel 6 takes up to 8 tokens, got {}", M);
    }
  } else {
    if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, 0>(w, x, M, y, stream, sl);
    else launch_dense_variant<NT, kSpc, kKs, false, 0>(w, x, M, y, stream, sl);
  }
}

// Bulk-ring strip kernel (GemmConfig kernel 4): kKs warps per CTA, each a
// K-slice of one strip, weights streamed by bulk copies (strip_mma_bulk). With
// kC > 1 the strip's K is split over the kC CTAs of a thread-block cluster that
// sum their partials through distributed shared memory: this makes the CTAs
// smaller and more numerous, so that they spread evenly over the SMs (448
// strips of 8 warps fill 132 SMs with 3 or 4 CTAs each: the SMs with 4 set
// the time).
constexpr int kBulkStages = 3;

template <int NT>
constexpr int bulk_partial_floats() { return NT * 4 * 32; }

constexpr int kBulkRingBytes = dev::bulk_ring_bytes(kBulkStages);

template <int NT, int kKs>
constexpr int bulk_smem_bytes() {
  return kKs * kBulkRingBytes + kKs * bulk_partial_floats<NT>() * 4;
}

template <int NT, int kKs, int kC, bool kBig>
__global__ void __launch_bounds__(kKs * 32)
    dense_bulk_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y) {
  extern __shared__ uint4 dyn_smem[];
  constexpr int kRing = kBulkRingBytes, kEntries = bulk_partial_floats<NT>();
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  float* part = reinterpret_cast<float*>(smem + kKs * kRing);  // [kKs][kEntries]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int strip = blockIdx.x / kC, rank = blockIdx.x % kC;
  const int KT = K / kTileK, slice = rank * kKs + warp;
  const int kt0 = slice * KT / (kC * kKs), kt1 = (slice + 1) * KT / (kC * kKs);
  const uint16_t* rows[NT];
  token_rows<NT>(x, M, K, g, rows);
  float acc[NT][4] = {};
  const size_t tile0 = size_t(strip) * KT;
  dev::strip_mma_bulk<NT, kBig, kBulkStages>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes,
                                             kt0, kt1, rows, acc, smem + warp * kRing);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) part[warp * kEntries + (nt * 4 + c) * 32 + lane] = acc[nt][c];
  __syncthreads();
  // The CTA's sum, in place in warp 0's slot (entry e is only touched by thread e).
  for (int e = threadIdx.x; e < kEntries; e += kKs * 32) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kKs; ++k) sum += part[k * kEntries + e];
    part[e] = sum;
  }
  auto store = [&](int e, float v) {
    const int i = e >> 5, l = e & 31, nt = i >> 2, c = i & 3;
    const int row = strip * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(v);
  };
  if constexpr (kC == 1) {
    for (int e = threadIdx.x; e < kEntries; e += kKs * 32) store(e, part[e]);
  } else {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    // Rank r sums entries [r * kEntries / kC, ...) over the cluster.
    const int e0 = rank * kEntries / kC, e1 = (rank + 1) * kEntries / kC;
    for (int e = e0 + int(threadIdx.x); e < e1; e += kKs * 32) {
      float sum = 0.f;
#pragma unroll
      for (int q = 0; q < kC; ++q) sum += cluster.map_shared_rank(part, q)[e];
      store(e, sum);
    }
    cluster.sync();  // keep this CTA's partial alive until every rank has read it
  }
}

template <int NT, int kKs, int kC, bool kBig>
void launch_bulk_variant(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                         cudaStream_t stream) {
  constexpr int kSmem = bulk_smem_bytes<NT, kKs>();
  auto* kernel = dense_bulk_kernel<NT, kKs, kC, kBig>;
  if constexpr (kSmem > 48 * 1024) {
    static PerDeviceOnce smem_attribute;
    smem_attribute([&] { MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem)); });
  }
  launch_with(kernel, dim3(unsigned(w.rows / kStripRows * kC)), kKs * 32, kSmem, stream, LaunchAttrs{false, kC},
              w.codes, w.scales, x, M, int(w.rows), int(w.cols), y);
}

template <int NT, int kKs, int kC>
void launch_bulk_scales(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                        cudaStream_t stream) {
  if (w.big_scales) launch_bulk_variant<NT, kKs, kC, true>(w, x, M, y, stream);
  else launch_bulk_variant<NT, kKs, kC, false>(w, x, M, y, stream);
}

// Compiled: 4 warps per CTA, clusters of 1 or 2 CTAs, up to 16 tokens per pass.
template <int NT>
void launch_bulk(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                 cudaStream_t stream, int ks, int cluster) {
  if constexpr (NT <= 2) {
    if (ks == 4 && cluster == 1) return launch_bulk_scales<NT, 4, 1>(w, x, M, y, stream);
    if (ks == 4 && cluster == 2) return launch_bulk_scales<NT, 4, 2>(w, x, M, y, stream);
  }
  fail_input("mxfp4_gemm: no bulk kernel for {} K-slices x {} CTAs at {} tokens", ks, cluster, M);
}

// The (strips per CTA, K-slices) pairs compiled for each token-group count.
template <int NT>
void launch_for_config(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream, int spc, int ks, Loads loads, StripLaunch sl) {
  if constexpr (NT <= 2) {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream, loads, sl);
    if (spc == 1 && ks == 8) return launch_dense<NT, 1, 8>(w, x, M, y, stream, loads, sl);
    if (spc == 1 && ks == 16) return launch_dense<NT, 1, 16>(w, x, M, y, stream, loads, sl);
  } else {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream, loads, sl);
  }
  fail_input("mxfp4_gemm: no strip kernel for {} strips per CTA x {} K-slices at {} tokens", spc, ks, M);
}

// Kernel 9's K-slices when the rule picks it (and kernel 12's from 9
// tokens): 4 from 2048 strips, else 8 (measured below, choose_config).
int pair_rule_k_slices(const Mxfp4DeviceWeight& w) { return w.rows / kStripRows >= 2048 ? 4 : 8; }

// Measured on H200 (docs/kernels.md, runs 3-10). Up to 32 tokens: the strip
// kernel with register loads (the cp.async ring measured 5-25% slower, the
// bulk-copy ring 10-25% slower; batched loads faster on large weights, below); with
// <= 16 tokens K-slices give each strip more warps: large weights (>= 2048
// strips) fill the GPU with 4, a few hundred strips over a long K want 16, short
// K wants 8. More than 32 tokens on large weights (N*K >= 64M, N % 128 == 0):
// the tiled tensor-core kernel (36864x7168 at M=64: 151 vs 195 us; expert-sized
// weights measured slower tiled: too few CTAs). Else the strip kernel, 4 slices.
// 17..64 tokens on large weights: the wgmma kernel (kernel 7, 2 K splits), H200
// 2026-11-30 (bench/mxfp4/results-dense-2026-11-30.md): 36864x7168 at 32 / 64
// tokens 87.9 / 131.0 us vs 96.9 (strip) / 154.8 (tiled), 7168x18432 50.3 / 73.7
// vs 55.6 / 85.3. Not at <= 16 tokens (72.5 vs 59.8 for the strip kernel) nor
// on expert-sized weights (4096x7168 at 64 tokens: 36.2 vs 25.7), nor above 64
// tokens (not measured: the tiled kernel takes them in one pass).
GemmConfig choose_config(const Mxfp4DeviceWeight& w, int M) {
  const int64_t strips = w.rows / kStripRows, tiles = w.cols / kTileK;
  GemmConfig c;
  c.strips_per_cta = 1;
  c.kernel = 1;
  c.k_slices = 4;
  const bool large = w.rows * w.cols >= (int64_t(64) << 20);
  if (M > 16 && M <= 64 && large && dense_wgmma_supported(w)) {
    c.kernel = 7;
    // 2026-12-01: the ring kernel (kernel 11) where its shape fits, H200
    // (bench/mxfp4/results-dense-wide-2026-12-01-s7.md): 36864x7168 at 32 / 64
    // tokens 71.3 / 95.0 us vs 80.1 / 123.7, 7168x18432 44.8 / 59.6 vs 45.5 / 71.8.
    if (dense_ws_supported(w)) c.kernel = 11;
    return c;
  }
  if (M > 32) {
    if (dense_tiled_supported(w) && w.rows * w.cols >= (int64_t(64) << 20)) c.kernel = 3;
    return c;
  }
  if (M > 16 || strips >= 2048) c.k_slices = 4;
  else if (strips <= 256 && tiles >= 96) c.k_slices = 16;
  else c.k_slices = 8;
  // 9..16 tokens on large weights: two strips per warp sharing the activation
  // loads (kernel 9), 4 K-slices from 2048 strips, else 8 (H200, 2026-12-01,
  // bench/mxfp4/results-dense-small-2026-12-01.md: 36864x7168 at 12 / 16
  // tokens 45.7 / 46.5 vs 57.0 / 64.9 us for kernel 1, 7168x18432 29.7 / 30.2
  // vs 33.0 / 33.9; -7..-11% in two earlier calls on the previous layout).
  // Expert-sized 4096x7168 measured slower (12.6 vs 11.3). Since 2026-12-02
  // also smaller weights with enough strip pairs (strip_pair_by_rule).
  if (strip_pair_by_rule(w.rows, w.cols, M) && dense_pair_supported(w, pair_rule_k_slices(w))) {
    c.kernel = 9;
    c.k_slices = pair_rule_k_slices(w);
    return c;
  }
  // Up to 8 tokens on large weights: every load of a batch issued first
  // (H200, 2026-11-30, bench/mxfp4/results-decode-2026-11-30.md). Kernel 5
  // where the grid spans several waves anyway (36864x7168 M=1: 43.8 vs 46.4
  // us for kernel 1); kernel 6 (<= 64 registers) for fewer strips, whose 8-warp
  // CTAs must all fit at once (7168x18432 M=1: 27.7 vs 29.1 for kernel 5 and
  // 29.5 for kernel 1). Expert-sized 4096x7168: kernel 5 slower (14.1 vs
  // 11.5), kernel 6 equal (11.4): left on kernel 1.
  if (M <= 8 && large) c.kernel = strips >= 2048 ? 5 : 6;
  // Fewer strips (7168x18432): each strip's 8 K-slices in a cluster of 2
  // CTAs of 4 warps (kernel 8), so that 896 small CTAs spread over the SMs
  // more evenly than 448 CTAs of 8 warps (H200, 2026-12-01: 23.2 vs 23.8 us
  // at M=1, 23.7 vs 24.6 at M=8; -2% in three earlier calls on the previous
  // layout).
  if (c.kernel == 6 && dense_balanced_supported(w)) c.kernel = 8;
  return c;
}

// A fallback's kernel choice with the caller's launch options (pdl, prefetch_tiles).
GemmConfig keeping_launch_options(GemmConfig fallback, const GemmConfig& caller) {
  fallback.pdl = caller.pdl;
  fallback.prefetch_tiles = caller.prefetch_tiles;
  return fallback;
}

// The strip kernels' launch options (cuda/host/strip_launch_rule.h), forced values checked.
StripLaunch strip_launch(const GemmConfig& config, int kernel, int M) {
  if (config.pdl < -1 || config.pdl > 1) fail_input("mxfp4_gemm: pdl must be -1, 0 or 1, got {}", config.pdl);
  if (config.prefetch_tiles < -1) fail_input("mxfp4_gemm: prefetch_tiles must be >= -1, got {}", config.prefetch_tiles);
  return choose_strip_launch(config.pdl, config.prefetch_tiles, kernel, M);
}

}  // namespace

void mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                cudaStream_t stream, GemmConfig config) {
  if (M <= 0) return;
  if (w.rows % kStripRows || w.cols % kTileK || w.rows <= 0)
    fail_input("mxfp4_gemm: weight [{}, {}] is not in the kernel layout (N % 16, K % 64)", w.rows,
               w.cols);
  if (config.fp8) {
    if (config.fp8 != 1 && config.fp8 != 2) fail_input("mxfp4_gemm: fp8 is 0, 1 or 2, got {}", config.fp8);
    if (config.fp8 == 2 && M > 64) fail_input("mxfp4_gemm: the fp8 probe runs one pass of up to 64 tokens, got {}", M);
    if (mxfp4_gemm_fp8(w, config.fp8 == 2 ? nullptr : x, M, y, stream,
                       {config.ring_warps, config.fp8_probe}))
      return;
    fail_input("mxfp4_gemm: the FP8 ring kernel's scratch cannot grow inside a stream capture (run it once first)");
  }
  GemmConfig c = choose_config(w, M);
  if (config.kernel) c.kernel = config.kernel;
  if (config.k_slices) c.k_slices = config.k_slices;
  if (config.strips_per_cta) c.strips_per_cta = config.strips_per_cta;
  if (config.k_splits) c.k_splits = config.k_splits;
  if (config.batch_tiles) c.batch_tiles = config.batch_tiles;
  if (config.strips_per_warp) c.strips_per_warp = config.strips_per_warp;
  if (c.kernel < 1 || c.kernel > 12) fail_input("mxfp4_gemm: kernel must be 1..12, got {}", c.kernel);
  const StripLaunch sl = strip_launch(config, c.kernel, M);
  if (c.kernel == 12) {
    if (M > 16) fail_input("mxfp4_gemm: the pipelined strip kernel takes 1..16 tokens, got {}", M);
    if (M <= 8) return launch_dense_balanced(w, x, M, y, stream, c.batch_tiles, sl, /*pipelined=*/true);
    const int ks = config.k_slices ? config.k_slices : pair_rule_k_slices(w);
    return launch_dense_pair(w, x, M, y, stream, ks, c.batch_tiles, sl, /*pipelined=*/true);
  }
  if (c.kernel == 10) {
    if (launch_dense_streamk(w, x, M, y, stream, c.strips_per_warp, c.batch_tiles, c.k_splits)) return;
    // Inside a capture before this stream's first eager stream-K launch: no
    // scratch can be allocated, so the rule's choice (never kernel 10).
    return mxfp4_gemm(w, x, M, y, stream, keeping_launch_options(choose_config(w, M), config));
  }
  if (c.kernel == 3) return launch_dense_tiled(w, x, M, y, stream, config.k_splits);
  if (c.kernel == 8) return launch_dense_balanced(w, x, M, y, stream, c.batch_tiles, sl);
  if (c.kernel == 9) {
    // The strip kernels' K-slice rule can give 16; the pair kernel has 4 or 8.
    const int ks = config.k_slices ? config.k_slices : c.k_slices == 8 ? 8 : 4;
    return launch_dense_pair(w, x, M, y, stream, ks, c.batch_tiles, sl);
  }
  if (c.kernel == 7) return launch_dense_wgmma(w, x, M, y, stream, config.k_splits);
  if (c.kernel == 11) {
    if (launch_dense_ws(w, x, M, y, stream, config.k_splits, config.batch_tiles, config.strips_per_cta,
                        config.ring_warps))
      return;
    // Inside a capture before this stream's scratch was big enough: the
    // wgmma kernel of before (or the strip kernel) instead.
    GemmConfig fallback;
    fallback.kernel = dense_wgmma_supported(w) ? 7 : 1;
    return mxfp4_gemm(w, x, M, y, stream, keeping_launch_options(fallback, config));
  }
  if (c.kernel == 4) {
    if (M > 16) fail_input("mxfp4_gemm: the bulk kernel takes up to 16 tokens, got {}", M);
    const int cluster = c.k_splits ? c.k_splits : 1;
    if (!config.k_slices && c.k_slices != 4) c.k_slices = 4;
    if (M <= 8) return launch_bulk<1>(w, x, M, y, stream, c.k_slices, cluster);
    return launch_bulk<2>(w, x, M, y, stream, c.k_slices, cluster);
  }
  const Loads loads = c.kernel == 2   ? Loads::kRing
                      : c.kernel == 5 ? Loads::kBatched
                      : c.kernel == 6 ? Loads::kBatchedTight
                                      : Loads::kRegisters;
  for (int m0 = 0; m0 < M; m0 += kMaxTokensPerPass) {
    const int m = std::min(kMaxTokensPerPass, M - m0);
    const uint16_t* xs = x + size_t(m0) * w.cols;
    uint16_t* ys = y + size_t(m0) * w.rows;
    if (m <= 8) launch_for_config<1>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, loads, sl);
    else if (m <= 16) launch_for_config<2>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, loads, sl);
    else if (m <= 32) launch_for_config<4>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, loads, sl);
    else launch_for_config<8>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, loads, sl);
  }
}

}  // namespace mx::cuda
