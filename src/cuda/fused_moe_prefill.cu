// Prefill path of the fused MoE: after the router (fused_moe.cu) has sorted
// the pairs by expert and cut each expert's list into tiles of 64, gate_up and
// down run as tensor-core tiles of 128 weight rows x 64 pairs
// (mxfp4_tiled.cuh), grid (rows / 128, tiles). Each weight element is
// dequantized once per 64 pairs. gate_up writes h = SiLU(gate) * up (BF16,
// row = pair) and zeroes out; down adds weight * y into out with FP32 atomics.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_internal.h"
#include "cuda/moe_tiles.cuh"
#include "cuda/mxfp4_tiled.cuh"

namespace mx::cuda {

namespace {

using dev::load_tile_pairs;

template <bool kBig>
__global__ void __launch_bounds__(dev::kTiledThreads, 3)
    gate_up_tiled_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                         const uint16_t* __restrict__ x, int H, int I, int topk, MoeScratch s,
                         float* __restrict__ out, int64_t out_elems) {
  extern __shared__ uint4 dyn_smem[];
  {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  __shared__ int s_pair[dev::kTiledTokens];
  int e;
  if (!load_tile_pairs(s, s_pair, e)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint16_t* rows[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int pair = s_pair[(tid >> 3) + 16 * q];
    rows[q] = pair >= 0 ? x + size_t(pair / topk) * H : nullptr;
  }
  const int KT = H / kTileK;
  const int strip0 = blockIdx.x * (dev::kTiledRows / kStripRows) + warp * 2;  // within the expert
  const size_t tile0 = (size_t(e) * (2 * I / kStripRows) + strip0) * KT;
  dev::TiledAcc acc = {};
  dev::tiled_mma<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT, 0, KT,
                       rows, reinterpret_cast<uint8_t*>(dyn_smem), acc);
  // Strip rows g are gate rows strip*8 + g, rows g + 8 the matching up rows.
#pragma unroll
  for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
    for (int nt = 0; nt < dev::kTiledTokens / 8; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int pair = s_pair[nt * 8 + 2 * t + j];
        if (pair < 0) continue;
        const float gate = acc[s2][nt][j], up = acc[s2][nt][2 + j];
        const float silu = gate / (1.f + __expf(-gate));
        s.h[size_t(pair) * I + (strip0 + s2) * 8 + g] = dev::float_to_bf16_bits(silu * up);
      }
}

template <bool kBig>
__global__ void __launch_bounds__(dev::kTiledThreads, 3)
    down_tiled_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int H,
                      int I, int topk, MoeScratch s, const float* __restrict__ weights,
                      float* __restrict__ out) {
  extern __shared__ uint4 dyn_smem[];
  __shared__ int s_pair[dev::kTiledTokens];
  int e;
  if (!load_tile_pairs(s, s_pair, e)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint16_t* rows[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int pair = s_pair[(tid >> 3) + 16 * q];
    rows[q] = pair >= 0 ? s.h + size_t(pair) * I : nullptr;
  }
  const int KT = I / kTileK;
  const int strip0 = blockIdx.x * (dev::kTiledRows / kStripRows) + warp * 2;
  const size_t tile0 = (size_t(e) * (H / kStripRows) + strip0) * KT;
  dev::TiledAcc acc = {};
  dev::tiled_mma<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT, 0, KT,
                       rows, reinterpret_cast<uint8_t*>(dyn_smem), acc);
#pragma unroll
  for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
    for (int nt = 0; nt < dev::kTiledTokens / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int pair = s_pair[nt * 8 + 2 * t + (c & 1)];
        if (pair < 0) continue;
        const int row = (strip0 + s2) * kStripRows + g + 8 * (c >> 1);
        atomicAdd(out + size_t(pair / topk) * H + row, weights[pair] * acc[s2][nt][c]);
      }
}

template <class Kernel>
void allow_tiled_smem(Kernel* kernel) {
  MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     dev::kTiledSmemBytes));
}

template <bool kBig>
void launch_down(const MoeWeights& w, int T, int topk, const float* topk_weights, float* out,
                 const MoeScratch& s, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] { allow_tiled_smem(down_tiled_kernel<kBig>); });
  quantize_h_for_w4a4(w, s, T * topk, stream);  // W4A4: down's input quantized first
  const int H = w.hidden, I = w.intermediate;
  const unsigned tiles = unsigned(moe_max_tiles(T * topk, w.experts));
  down_tiled_kernel<kBig><<<dim3(unsigned(H / dev::kTiledRows), tiles), dev::kTiledThreads,
                            dev::kTiledSmemBytes, stream>>>(w.w2_codes, w.w2_scales, H, I, topk, s,
                                                            topk_weights, out);
  MX_CUDA_CHECK(cudaGetLastError());
}

template <bool kBig>
void launch_prefill(const MoeWeights& w, const uint16_t* x, int T, int topk, const float* topk_weights,
                    float* out, const MoeScratch& s, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] { allow_tiled_smem(gate_up_tiled_kernel<kBig>); });
  const int H = w.hidden, I = w.intermediate;
  const unsigned tiles = unsigned(moe_max_tiles(T * topk, w.experts));
  gate_up_tiled_kernel<kBig><<<dim3(unsigned(2 * I / dev::kTiledRows), tiles), dev::kTiledThreads,
                               dev::kTiledSmemBytes, stream>>>(w.w13_codes, w.w13_scales, x, H, I,
                                                               topk, s, out, int64_t(T) * H);
  MX_CUDA_CHECK(cudaGetLastError());
  launch_down<kBig>(w, T, topk, topk_weights, out, s, stream);
}

}  // namespace

void launch_moe_prefill(const MoeWeights& w, const uint16_t* x, int T, int topk,
                        const float* topk_weights, float* out, const MoeScratch& s,
                        cudaStream_t stream) {
  if (w.big_scales) launch_prefill<true>(w, x, T, topk, topk_weights, out, s, stream);
  else launch_prefill<false>(w, x, T, topk, topk_weights, out, s, stream);
}

void launch_moe_prefill_down(const MoeWeights& w, int T, int topk, const float* topk_weights,
                             float* out, const MoeScratch& s, cudaStream_t stream) {
  if (w.big_scales) launch_down<true>(w, T, topk, topk_weights, out, s, stream);
  else launch_down<false>(w, T, topk, topk_weights, out, s, stream);
}

}  // namespace mx::cuda
