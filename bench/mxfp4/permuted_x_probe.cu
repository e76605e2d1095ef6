// --dense-small probe of the activation load order (issue #8, session 8; see
// permuted_x_probe.h). Bench-only: the library's kernels are untouched.
#include "permuted_x_probe.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda/mxfp4_device.cuh"

namespace mxbench {

namespace {

using namespace mx::cuda;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "CUDA error %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

constexpr int kNT = 2;  // token groups (9..16 tokens)

// xp[((kt * 2 + nt) * 2 + h) * 32 + lane] = the 16 bytes lane (g, t) of the
// MMA needs for token group nt, half h of K tile kt: x[nt * 8 + g][64 kt +
// 16 t + 8 h ..] (zeros from row M on).
__global__ void __launch_bounds__(256) permute_kernel(const uint16_t* __restrict__ x, uint4* __restrict__ xp,
                                                      int M, int K) {
  dev::griddep_launch_dependents();  // the GEMM's CTAs may start now
  const int idx = blockIdx.x * 256 + threadIdx.x;
  if (idx >= K / kTileK * kNT * 2 * 32) return;
  const int lane = idx & 31, h = (idx >> 5) & 1, nt = (idx >> 6) & 1, kt = idx >> 7;
  const int token = nt * 8 + (lane >> 2), t = lane & 3;
  xp[idx] = token < M ? *reinterpret_cast<const uint4*>(x + size_t(token) * K + kt * kTileK + 16 * t + 8 * h)
                      : make_uint4(0, 0, 0, 0);
}

// Kernel 9's pair loop (2-tile batches, every load of a batch issued first)
// with each activation load one coalesced 512-byte warp access.
template <int kKs>
__global__ void __launch_bounds__(kKs * 32)
    pair_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, const uint4* __restrict__ xp,
                int M, int N, int K, uint16_t* __restrict__ y, bool wait_prior) {
  constexpr int kU = 2, E = kNT * 4 * 32;
  __shared__ float part[kKs][2][E];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int KT = K / kTileK, strip0 = blockIdx.x * 2;
  const int kt0 = warp * KT / kKs, kt1 = (warp + 1) * KT / kKs;
  const size_t tile0 = size_t(strip0) * KT;
  const uint4* wp = reinterpret_cast<const uint4*>(codes + tile0 * kTileCodeBytes) + lane + kt0 * 32;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales + tile0 * kTileScaleBytes) + (t >> 1) * 8 + g + kt0 * 16;
  const int wstride = KT * 32, sstride = KT * 16;
  const uint4* xq = xp + size_t(kt0) * (kNT * 2 * 32) + lane;
  float acc[2][kNT][4] = {};
  if (wait_prior) dev::griddep_wait();  // x is written by the permutation launched before
  int kt = kt0;
  for (; kt + kU <= kt1; kt += kU, wp += kU * 32, sp += kU * 16, xq += kU * kNT * 2 * 32) {
    uint4 w[2][kU];
    uint32_t sc[2][kU];
    uint4 xa[kU][kNT][2];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        w[s][u] = dev::load_stream_ordered(wp + s * wstride + u * 32);
        sc[s][u] = dev::load_u16_ordered(sp + s * sstride + u * 16);
      }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          xa[u][nt][h] = dev::load_act_ordered(reinterpret_cast<const uint16_t*>(xq + (u * kNT + nt) * 64 + h * 32));
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int s = 0; s < 2; ++s) dev::mma_tile<kNT, false>(w[s][u], sc[s][u], xa[u], acc[s]);
  }
  for (; kt < kt1; ++kt, wp += 32, sp += 16, xq += kNT * 2 * 32) {
    uint4 xa[kNT][2];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) xa[nt][h] = xq[nt * 64 + h * 32];
#pragma unroll
    for (int s = 0; s < 2; ++s)
      dev::mma_tile<kNT, false>(dev::load_stream(wp + s * wstride), __ldg(sp + s * sstride), xa, acc[s]);
  }
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) part[warp][s][(nt * 4 + c) * 32 + lane] = acc[s][nt][c];
  __syncthreads();
  for (int e = threadIdx.x; e < 2 * E; e += kKs * 32) {
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

template <int kKs>
void launch_pair(const Mxfp4DeviceWeight& w, const uint4* xp, int M, uint16_t* y, bool pdl, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(w.rows / 32));
  cfg.blockDim = dim3(kKs * 32);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, pair_kernel<kKs>, w.codes, w.scales, xp, M, int(w.rows), int(w.cols), y, pdl),
        "pair_kernel");
}

}  // namespace

size_t permuted_x_bytes(int64_t K) { return size_t(K / kTileK) * kNT * 2 * 32 * 16; }

void permute_x_for_pairs(const uint16_t* x, int M, int64_t K, uint4* xp, cudaStream_t s) {
  const int n = int(K / kTileK) * kNT * 2 * 32;
  permute_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, xp, M, int(K));
  check(cudaGetLastError(), "permute_kernel");
}

void pair_gemm_on_permuted_x(const Mxfp4DeviceWeight& w, const uint4* xp, int M, uint16_t* y, int k_slices, bool pdl,
                             cudaStream_t s) {
  if (k_slices == 4) return launch_pair<4>(w, xp, M, y, pdl, s);
  launch_pair<8>(w, xp, M, y, pdl, s);
}

}  // namespace mxbench
