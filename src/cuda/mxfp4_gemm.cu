// Dense MXFP4 GEMM for decode shapes (W4A16): one CTA per 16-row strip, its
// warps split K, partial sums meet in shared memory. Weights are the A operand
// of mma.m16n8k16 (16 rows), tokens the N operand (8 per MMA), so M = 1 wastes
// MMA lanes but not memory traffic, which is what decode is bound by.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

constexpr int kMaxTokensPerPass = 64;

// Shared-memory ring depth (tiles in flight per warp) of the cp.async kernel
// variant: 8 up to 8 warps per CTA (40 KB), 4 for 16 warps.
constexpr int ring_depth(int warps) { return warps <= 8 ? 8 : 4; }

// CTA = kSpc strips x kKs K-slices (one warp each). Warps of the same K-slice
// read the same activations at about the same time, so with many tokens the
// activations come from L1 kSpc times less often; the K-slices meet in shared
// memory. kDepth = 0: weights loaded into registers 4 tiles at a time
// (strip_mma); kDepth > 0: streamed through a per-warp cp.async ring
// (strip_mma_ring), whose space then holds the warp's partial sums.
template <int NT, int kSpc, int kKs, bool kBig, int kDepth>
__global__ void __launch_bounds__(kSpc * kKs * 32)
    dense_gemm_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y) {
  extern __shared__ uint4 dyn_smem[];
  constexpr int kPartialBytes = NT * 4 * 32 * 4;  // one warp's accumulators
  constexpr int kRegionBytes = kDepth ? dev::ring_bytes(kDepth) : kPartialBytes;
  static_assert(kRegionBytes >= kPartialBytes, "ring too small for the partial sums");
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int s_local = warp % kSpc, slice = warp / kSpc;
  const int strip = blockIdx.x * kSpc + s_local;
  const int g = lane >> 2;
  const int KT = K / kTileK;
  const int kt0 = slice * KT / kKs, kt1 = (slice + 1) * KT / kKs;

  const uint16_t* rows[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * 8 + g;
    rows[nt] = token < M ? x + size_t(token) * K : nullptr;
  }
  float acc[NT][4] = {};
  const size_t tile0 = size_t(strip) * KT;
  uint8_t* region = smem + warp * kRegionBytes;
  if constexpr (kDepth > 0)
    dev::strip_mma_ring<NT, kBig, kDepth>(codes + tile0 * kTileCodeBytes,
                                          scales + tile0 * kTileScaleBytes, kt0, kt1, rows, acc,
                                          region);
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
                          cudaStream_t stream) {
  constexpr int kWarps = kSpc * kKs;
  constexpr int kRegion = kDepth ? dev::ring_bytes(kDepth) : NT * 4 * 32 * 4;
  constexpr int kSmem = kWarps * kRegion;
  auto* kernel = dense_gemm_kernel<NT, kSpc, kKs, kBig, kDepth>;
  if constexpr (kSmem > 48 * 1024) {
    static PerDeviceOnce smem_attribute;
    smem_attribute([&] { MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem)); });
  }
  const int N = int(w.rows), K = int(w.cols);
  kernel<<<unsigned(N / kStripRows / kSpc), kWarps * 32, kSmem, stream>>>(w.codes, w.scales, x, M, N, K, y);
  MX_CUDA_CHECK(cudaGetLastError());
}

template <int NT, int kSpc, int kKs>
void launch_dense(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                  cudaStream_t stream, bool ring) {
  if ((w.rows / kStripRows) % kSpc)
    fail_input("mxfp4_gemm: {} strips of 16 rows do not split into CTAs of {}", w.rows / kStripRows, kSpc);
  constexpr int kDepth = ring_depth(kSpc * kKs);
  if (ring) {
    if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, kDepth>(w, x, M, y, stream);
    else launch_dense_variant<NT, kSpc, kKs, false, kDepth>(w, x, M, y, stream);
  } else {
    if (w.big_scales) launch_dense_variant<NT, kSpc, kKs, true, 0>(w, x, M, y, stream);
    else launch_dense_variant<NT, kSpc, kKs, false, 0>(w, x, M, y, stream);
  }
}

// The (strips per CTA, K-slices) pairs compiled for each token-group count.
template <int NT>
void launch_for_config(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream, int spc, int ks, bool ring) {
  if constexpr (NT <= 2) {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream, ring);
    if (spc == 1 && ks == 8) return launch_dense<NT, 1, 8>(w, x, M, y, stream, ring);
    if (spc == 1 && ks == 16) return launch_dense<NT, 1, 16>(w, x, M, y, stream, ring);
  } else {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream, ring);
  }
  fail_input("mxfp4_gemm: no strip kernel for {} strips per CTA x {} K-slices at {} tokens", spc, ks, M);
}

// Measured on H200 (docs/kernels.md, runs 3-8). Up to 32 tokens: the strip
// kernel with register loads (the cp.async ring measured 5-25% slower); with
// <= 16 tokens K-slices give each strip more warps: large weights (>= 2048
// strips) fill the GPU with 4, a few hundred strips over a long K want 16, short
// K wants 8. More than 32 tokens on large weights (N*K >= 64M, N % 128 == 0):
// the tiled tensor-core kernel (36864x7168 at M=64: 151 vs 195 us; expert-sized
// weights measured slower tiled: too few CTAs). Else the strip kernel, 4 slices.
GemmConfig choose_config(const Mxfp4DeviceWeight& w, int M) {
  const int64_t strips = w.rows / kStripRows, tiles = w.cols / kTileK;
  GemmConfig c;
  c.strips_per_cta = 1;
  c.kernel = 1;
  c.k_slices = 4;
  if (M > 32) {
    if (dense_tiled_supported(w) && w.rows * w.cols >= (int64_t(64) << 20)) c.kernel = 3;
    return c;
  }
  if (M > 16 || strips >= 2048) c.k_slices = 4;
  else if (strips <= 256 && tiles >= 96) c.k_slices = 16;
  else c.k_slices = 8;
  return c;
}

}  // namespace

void mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                cudaStream_t stream, GemmConfig config) {
  if (M <= 0) return;
  if (w.rows % kStripRows || w.cols % kTileK || w.rows <= 0)
    fail_input("mxfp4_gemm: weight [{}, {}] is not in the kernel layout (N % 16, K % 64)", w.rows,
               w.cols);
  GemmConfig c = choose_config(w, M);
  if (config.kernel) c.kernel = config.kernel;
  if (config.k_slices) c.k_slices = config.k_slices;
  if (config.strips_per_cta) c.strips_per_cta = config.strips_per_cta;
  if (c.kernel < 1 || c.kernel > 3) fail_input("mxfp4_gemm: kernel must be 1, 2 or 3, got {}", c.kernel);
  if (c.kernel == 3) return launch_dense_tiled(w, x, M, y, stream, config.k_splits);
  const bool ring = c.kernel == 2;
  for (int m0 = 0; m0 < M; m0 += kMaxTokensPerPass) {
    const int m = std::min(kMaxTokensPerPass, M - m0);
    const uint16_t* xs = x + size_t(m0) * w.cols;
    uint16_t* ys = y + size_t(m0) * w.rows;
    if (m <= 8) launch_for_config<1>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, ring);
    else if (m <= 16) launch_for_config<2>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, ring);
    else if (m <= 32) launch_for_config<4>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, ring);
    else launch_for_config<8>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices, ring);
  }
}

}  // namespace mx::cuda
