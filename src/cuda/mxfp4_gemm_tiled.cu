// Dense MXFP4 GEMM for many tokens (W4A16): tensor-core tiles of 128 weight
// rows x 64 tokens (mxfp4_tiled.cuh). Grid (N / 128, token tiles, K splits);
// with K split over CTAs, the CTAs of one output tile form a thread-block
// cluster and sum their FP32 partial tiles through distributed shared memory,
// so no workspace and no atomics are needed (and it stays graph-capturable).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/device_info.h"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_tiled.cuh"

namespace mx::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kPartLd = dev::kTiledTokens + 8;  // FP32 partial tile row stride (banks)

template <bool kBig>
__global__ void __launch_bounds__(dev::kTiledThreads, 3)
    dense_tiled_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                       const uint16_t* __restrict__ x, int M, int N, int K,
                       uint16_t* __restrict__ y) {
  extern __shared__ uint4 dyn_smem[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int KT = K / kTileK, splits = gridDim.z, split = blockIdx.z;
  const int kt0 = split * KT / splits, kt1 = (split + 1) * KT / splits;
  const int tok0 = blockIdx.y * dev::kTiledTokens;
  const uint16_t* rows[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int token = tok0 + (tid >> 3) + 16 * q;
    rows[q] = token < M ? x + size_t(token) * K : nullptr;
  }
  const int strip0 = blockIdx.x * (dev::kTiledRows / kStripRows) + warp * 2;
  const size_t tile0 = size_t(strip0) * KT;
  dev::TiledAcc acc = {};
  dev::tiled_mma<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT, kt0,
                       kt1, rows, smem, acc);
  if (splits == 1) {
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int nt = 0; nt < dev::kTiledTokens / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int row = (strip0 + s) * kStripRows + g + 8 * (c >> 1);
          const int token = tok0 + nt * 8 + 2 * t + (c & 1);
          if (token < M) y[size_t(token) * N + row] = dev::float_to_bf16_bits(acc[s][nt][c]);
        }
    return;
  }
  // Split K: this CTA's partial [128 rows][64 tokens] in its shared memory;
  // rank r of the cluster sums rows [r * 128 / splits, ...) over all ranks.
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int nt = 0; nt < dev::kTiledTokens / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        part[(warp * 32 + s * 16 + g + 8 * (c >> 1)) * kPartLd + nt * 8 + 2 * t + (c & 1)] =
            acc[s][nt][c];
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int rank = int(cluster.block_rank()), rows_per = dev::kTiledRows / splits;
  for (int e = tid; e < rows_per * dev::kTiledTokens; e += dev::kTiledThreads) {
    const int r = rank * rows_per + e % rows_per, tk = e / rows_per;
    float sum = 0.f;
    for (int q = 0; q < splits; ++q) sum += cluster.map_shared_rank(part, q)[r * kPartLd + tk];
    const int token = tok0 + tk;
    if (token < M)
      y[size_t(token) * N + size_t(blockIdx.x) * dev::kTiledRows + r] = dev::float_to_bf16_bits(sum);
  }
  cluster.sync();  // keep this CTA's partial alive until every rank has read it
}

// Fewest K splits (1, 2, 4, 8) that give every SM at least one CTA, each CTA
// keeping >= 16 K tiles. Measured on H200 (run 8): 36864x7168 M=64 (288 CTAs)
// 151 us unsplit vs 185 with 4; 7168x18432 M=64 (56 CTAs) 85 us with 4 vs 165
// unsplit and 88 with 8.
int choose_splits(int64_t base_ctas, int KT) {
  int s = 1;
  while (s < 8 && base_ctas * s < sm_count() && KT / (2 * s) >= 16) s *= 2;
  return s;
}

template <bool kBig>
void launch_tiled(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                  cudaStream_t stream, int splits) {
  auto* kernel = dense_tiled_kernel<kBig>;
  static PerDeviceOnce smem_attribute;
  smem_attribute([&] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       dev::kTiledSmemBytes));
  });
  const dim3 grid(unsigned(w.rows / dev::kTiledRows), unsigned((M + dev::kTiledTokens - 1) / dev::kTiledTokens),
                  unsigned(splits));
  launch_with(kernel, grid, dev::kTiledThreads, dev::kTiledSmemBytes, stream,
              LaunchAttrs{false, dim3(1, 1, unsigned(splits))}, w.codes, w.scales, x, M, int(w.rows), int(w.cols), y);
}

}  // namespace

bool dense_tiled_supported(const Mxfp4DeviceWeight& w) { return w.rows % dev::kTiledRows == 0; }

void launch_dense_tiled(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                        cudaStream_t stream, int k_splits) {
  if (!dense_tiled_supported(w))
    fail_input("mxfp4_gemm: the tiled kernel needs N % {} == 0, got N={}", dev::kTiledRows, w.rows);
  const int KT = int(w.cols / kTileK);
  const int64_t base = (w.rows / dev::kTiledRows) * ((M + dev::kTiledTokens - 1) / dev::kTiledTokens);
  const int splits = k_splits ? k_splits : choose_splits(base, KT);
  if (splits != 1 && splits != 2 && splits != 4 && splits != 8)
    fail_input("mxfp4_gemm: k_splits must be 1, 2, 4 or 8, got {}", splits);
  if (KT < splits) fail_input("mxfp4_gemm: {} K tiles cannot be split {} ways", KT, splits);
  if (w.big_scales) launch_tiled<true>(w, x, M, y, stream, splits);
  else launch_tiled<false>(w, x, M, y, stream, splits);
}

}  // namespace mx::cuda
