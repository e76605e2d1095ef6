// Tensor-core tile of the MXFP4 kernels for many tokens (dense M > 16, MoE
// prefill): a CTA of 4 warps computes 128 weight rows x 64 tokens. The 64
// token rows of each 64-wide K tile are copied once into shared memory
// (cp.async, kTiledStages deep) and shared by the 4 warps; each warp streams
// its two 16-row strips through a private cp.async ring, dequantizes each
// weight fragment once in registers and uses it for 8 mma.m16n8k16 (64
// tokens). So a weight byte is dequantized once per 64 tokens instead of once
// per 8, and activations come from shared memory instead of L1/L2 per warp.
#pragma once
#include "cuda/mxfp4_device.cuh"

namespace mx::cuda::dev {

constexpr int kTiledWarps = 4;
constexpr int kTiledThreads = kTiledWarps * 32;
constexpr int kTiledRows = kTiledWarps * 2 * kStripRows;  // 128
constexpr int kTiledTokens = 64;
constexpr int kTiledStages = 4;
// One token row of a K tile: 64 BF16 = 128 bytes, padded by 16 so that the 8
// rows a warp reads at once fall in different banks.
constexpr int kActRowBytes = kTileK * 2 + 16;
constexpr int kActStageBytes = kTiledTokens * kActRowBytes;                // 9216
constexpr int kWarpStageBytes = 2 * (kRingCodeBytes + kRingScaleBytes);  // two strips
constexpr int kTiledSmemBytes =
    kTiledStages * (kActStageBytes + kTiledWarps * kWarpStageBytes);  // 57344

// Accumulators of one warp: [strip 0/1][token group of 8][mma register].
using TiledAcc = float[2][kTiledTokens / 8][4];

// Accumulates K tiles [kt0, kt1) into acc. `strip_codes`/`strip_scales` point
// at tile 0 of the warp's first strip; its second strip follows `strip_stride`
// tiles later. rows[r] (r = this thread's 4 rows tid/8 + 16q) is the token row
// (BF16, K contiguous) or null for padding. smem: kTiledSmemBytes, 16-aligned.
template <bool kBig>
__device__ __forceinline__ void tiled_mma(const uint8_t* __restrict__ strip_codes,
                                          const uint8_t* __restrict__ strip_scales,
                                          size_t strip_stride, int kt0, int kt1,
                                          const uint16_t* const (&rows)[4], uint8_t* smem,
                                          TiledAcc& acc) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t act0 = smem_addr(smem);
  const uint32_t ring0 =
      smem_addr(smem) + kTiledStages * kActStageBytes + warp * kTiledStages * kWarpStageBytes;
  // Activation copy: thread tid moves 16-byte chunk (tid & 7) of rows tid/8 + 16q.
  const int chunk = tid & 7, row0 = tid >> 3;
  // Weight ring: per stage [strip0 codes | strip1 codes | strip0 scales | strip1 scales].
  const uint8_t* wsrc[2];
  const uint8_t* ssrc[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    wsrc[s] = strip_codes + (s * strip_stride + kt0) * kTileCodeBytes + lane * 16;
    ssrc[s] = strip_scales + (s * strip_stride + kt0) * kTileScaleBytes + (t >> 1) * 16 + (g >> 1) * 4;
  }
  auto issue = [&](int j) {  // copies of K tile kt0 + j into stage j % kTiledStages
    const int st = j & (kTiledStages - 1);
    const uint32_t a = act0 + st * kActStageBytes + row0 * kActRowBytes + chunk * 16;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint16_t* src = rows[q] ? rows[q] + size_t(kt0 + j) * kTileK + chunk * 8 : nullptr;
      cp_async_16_or_zero(a + q * 16 * kActRowBytes, src ? src : reinterpret_cast<const uint16_t*>(wsrc[0]),
                          src != nullptr);
    }
    const uint32_t r = ring0 + st * kWarpStageBytes;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      cp_async_16(r + s * kRingCodeBytes + lane * 16, wsrc[s] + size_t(j) * kTileCodeBytes);
      cp_async_4(r + 2 * kRingCodeBytes + s * kRingScaleBytes + lane * 4,
                 ssrc[s] + size_t(j) * kTileScaleBytes);
    }
  };
  const int n = kt1 - kt0;
#pragma unroll
  for (int j = 0; j < kTiledStages - 1; ++j) {
    if (j < n) issue(j);
    cp_async_commit();
  }
  for (int i = 0; i < n; ++i) {
    cp_async_wait<kTiledStages - 2>();
    // Tile i is in everyone's copies; everyone is done with tile i - 1, whose
    // stage the next issue overwrites.
    __syncthreads();
    if (i + kTiledStages - 1 < n) issue(i + kTiledStages - 1);
    cp_async_commit();
    const int st = i & (kTiledStages - 1);
    const uint32_t r = ring0 + st * kWarpStageBytes;
    uint4 w[2];
    ScaleMul m[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      w[s] = lds128(r + s * kRingCodeBytes + lane * 16);
      const uint32_t sw = lds32(r + 2 * kRingCodeBytes + s * kRingScaleBytes + lane * 4);
      m[s] = scale_multipliers<kBig>((g & 1) ? (sw >> 16) : (sw & 0xFFFFu));
    }
    const uint32_t xa = act0 + st * kActStageBytes + g * kActRowBytes + 32 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint4 xb[kTiledTokens / 8];
#pragma unroll
      for (int nt = 0; nt < kTiledTokens / 8; ++nt) xb[nt] = lds128(xa + nt * 8 * kActRowBytes + 16 * h);
#pragma unroll
      for (int k2 = 0; k2 < 2; ++k2) {
        const int kk = 2 * h + k2;
        uint32_t a[2][4];
#pragma unroll
        for (int s = 0; s < 2; ++s) dequant_fragment<kBig>(word_of(w[s], kk), m[s], a[s]);
#pragma unroll
        for (int nt = 0; nt < kTiledTokens / 8; ++nt)
#pragma unroll
          for (int s = 0; s < 2; ++s)
            mma_bf16_16816(acc[s][nt], a[s], word_of(xb[nt], 2 * k2), word_of(xb[nt], 2 * k2 + 1));
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // smem may be reused by the caller's epilogue
}

}  // namespace mx::cuda::dev
