// Dense MXFP4 GEMM for decode shapes (W4A16): one CTA per 16-row strip, its
// warps split K, partial sums meet in shared memory. Weights are the A operand
// of mma.m16n8k16 (16 rows), tokens the N operand (8 per MMA), so M = 1 wastes
// MMA lanes but not memory traffic, which is what decode is bound by.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

constexpr int kMaxTokensPerPass = 64;

// CTA = kSpc strips x kKs K-slices (one warp each). Warps of the same K-slice
// read the same activations at about the same time, so with many tokens the
// activations come from L1 kSpc times less often; the K-slices meet in shared
// memory.
template <int NT, int kSpc, int kKs, bool kBig>
__global__ void __launch_bounds__(kSpc * kKs * 32)
    dense_gemm_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y) {
  __shared__ float partial[kKs][kSpc][NT * 4][32];
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
  dev::strip_mma<NT, kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                           kt1, rows, acc);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[slice][s_local][nt * 4 + c][lane] = acc[nt][c];
  __syncthreads();
  for (int e = threadIdx.x; e < kSpc * NT * 4 * 32; e += kSpc * kKs * 32) {
    const int sl = e / (NT * 4 * 32), i = (e >> 5) % (NT * 4), l = e & 31;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kKs; ++k) sum += partial[k][sl][i][l];
    const int nt = i >> 2, c = i & 3;
    const int row = (blockIdx.x * kSpc + sl) * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(sum);
  }
}

template <int NT, int kSpc, int kKs>
void launch_dense(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                  cudaStream_t stream) {
  const int N = int(w.rows), K = int(w.cols);
  if ((N / kStripRows) % kSpc)
    fail_input("mxfp4_gemm: {} strips of 16 rows do not split into CTAs of {}", N / kStripRows, kSpc);
  const dim3 grid(unsigned(N / kStripRows / kSpc));
  const int threads = kSpc * kKs * 32;
  if (w.big_scales)
    dense_gemm_kernel<NT, kSpc, kKs, true><<<grid, threads, 0, stream>>>(w.codes, w.scales, x, M, N, K, y);
  else
    dense_gemm_kernel<NT, kSpc, kKs, false><<<grid, threads, 0, stream>>>(w.codes, w.scales, x, M, N, K, y);
  MX_CUDA_CHECK(cudaGetLastError());
}

// The (strips per CTA, K-slices) pairs compiled for each token-group count.
template <int NT>
void launch_for_config(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream, int spc, int ks) {
  if constexpr (NT <= 2) {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream);
    if (spc == 1 && ks == 8) return launch_dense<NT, 1, 8>(w, x, M, y, stream);
    if (spc == 1 && ks == 16) return launch_dense<NT, 1, 16>(w, x, M, y, stream);
  } else {
    if (spc == 1 && ks == 4) return launch_dense<NT, 1, 4>(w, x, M, y, stream);
    if (spc == 2 && ks == 4) return launch_dense<NT, 2, 4>(w, x, M, y, stream);
    if (spc == 4 && ks == 2) return launch_dense<NT, 4, 2>(w, x, M, y, stream);
  }
  fail_input("mxfp4_gemm: no kernel for {} strips per CTA x {} K-slices at {} tokens", spc, ks, M);
}

// Measured on H200 (docs/kernels.md, runs 3-6). Few tokens: K-slices give each
// strip more loads in flight. Large weights (>= 2048 strips) fill the GPU with 4;
// a few hundred strips over a long K want 16 (4096x7168: 10.8 vs 12.4 us with 8);
// short K wants 8 (7168x2048: 8.1 vs 8.8 with 16). Many tokens: 4 slices; sharing
// activations between strips of a CTA (strips_per_cta 2 or 4) measured no faster.
GemmConfig choose_config(const Mxfp4DeviceWeight& w, int M) {
  const int64_t strips = w.rows / kStripRows, tiles = w.cols / kTileK;
  GemmConfig c;
  c.strips_per_cta = 1;
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
  for (int m0 = 0; m0 < M; m0 += kMaxTokensPerPass) {
    const int m = std::min(kMaxTokensPerPass, M - m0);
    GemmConfig c = choose_config(w, m);
    if (config.k_slices) c.k_slices = config.k_slices;
    if (config.strips_per_cta) c.strips_per_cta = config.strips_per_cta;
    const uint16_t* xs = x + size_t(m0) * w.cols;
    uint16_t* ys = y + size_t(m0) * w.rows;
    if (m <= 8) launch_for_config<1>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices);
    else if (m <= 16) launch_for_config<2>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices);
    else if (m <= 32) launch_for_config<4>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices);
    else launch_for_config<8>(w, xs, m, ys, stream, c.strips_per_cta, c.k_slices);
  }
}

}  // namespace mx::cuda
