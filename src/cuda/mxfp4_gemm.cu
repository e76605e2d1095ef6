// Dense MXFP4 GEMM for decode shapes (W4A16): one CTA per 16-row strip, its
// warps split K, partial sums meet in shared memory. Weights are the A operand
// of mma.m16n8k16 (16 rows), tokens the N operand (8 per MMA), so M = 1 wastes
// MMA lanes but not memory traffic, which is what decode is bound by.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

constexpr int kMaxTokensPerPass = 64;

template <int NT, int kWarps, bool kBig>
__global__ void __launch_bounds__(kWarps * 32)
    dense_gemm_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                      const uint16_t* __restrict__ x, int M, int N, int K,
                      uint16_t* __restrict__ y) {
  __shared__ float partial[kWarps][NT * 4][32];
  const int strip = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int KT = K / kTileK;
  const int kt0 = warp * KT / kWarps, kt1 = (warp + 1) * KT / kWarps;

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
    for (int c = 0; c < 4; ++c) partial[warp][nt * 4 + c][lane] = acc[nt][c];
  __syncthreads();
  for (int e = threadIdx.x; e < NT * 4 * 32; e += kWarps * 32) {
    const int i = e >> 5, l = e & 31;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][i][l];
    const int nt = i >> 2, c = i & 3;
    const int row = strip * kStripRows + (l >> 2) + 8 * (c >> 1);
    const int token = nt * 8 + 2 * (l & 3) + (c & 1);
    if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(sum);
  }
}

template <int NT, int kWarps>
void launch_dense(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                  cudaStream_t stream) {
  const dim3 grid(unsigned(w.rows / kStripRows));
  const int N = int(w.rows), K = int(w.cols);
  if (w.big_scales)
    dense_gemm_kernel<NT, kWarps, true><<<grid, kWarps * 32, 0, stream>>>(w.codes, w.scales, x, M, N, K, y);
  else
    dense_gemm_kernel<NT, kWarps, false><<<grid, kWarps * 32, 0, stream>>>(w.codes, w.scales, x, M, N, K, y);
  MX_CUDA_CHECK(cudaGetLastError());
}

template <int kWarps>
void launch_for_tokens(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                       cudaStream_t stream) {
  if (M <= 8) launch_dense<1, kWarps>(w, x, M, y, stream);
  else if (M <= 16) launch_dense<2, kWarps>(w, x, M, y, stream);
  else if (M <= 32) launch_dense<4, kWarps>(w, x, M, y, stream);
  else launch_dense<8, kWarps>(w, x, M, y, stream);
}

// Enough warps per strip that the grid fills the GPU several times over, but
// each warp still streams a few tiles (fewer, longer warps need fewer
// partial-sum exchanges).
int choose_warps(const Mxfp4DeviceWeight& w) {
  const int64_t strips = w.rows / kStripRows, tiles = w.cols / kTileK;
  if (strips >= 2048) return 4;
  return tiles >= 64 ? 8 : 4;
}

}  // namespace

void mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                cudaStream_t stream, GemmConfig config) {
  if (M <= 0) return;
  if (w.rows % kStripRows || w.cols % kTileK || w.rows <= 0)
    fail_input("mxfp4_gemm: weight [{}, {}] is not in the kernel layout (N % 16, K % 64)", w.rows,
               w.cols);
  const int warps = config.warps ? config.warps : choose_warps(w);
  for (int m0 = 0; m0 < M; m0 += kMaxTokensPerPass) {
    const int m = std::min(kMaxTokensPerPass, M - m0);
    const uint16_t* xs = x + size_t(m0) * w.cols;
    uint16_t* ys = y + size_t(m0) * w.rows;
    switch (warps) {
      case 4: launch_for_tokens<4>(w, xs, m, ys, stream); break;
      case 8: launch_for_tokens<8>(w, xs, m, ys, stream); break;
      default: fail_input("mxfp4_gemm: warps per CTA must be 4 or 8, got {}", warps);
    }
  }
}

}  // namespace mx::cuda
