// Software-pipelined strip loop of the dense kernels for 1..16 tokens
// (GemmConfig kernel 12: kernel 8's CTA up to 8 tokens, kernel 9's strip
// pairs from 9). Included by mxfp4_gemm_balanced.cu and mxfp4_gemm_pair.cu.
//
// Why (ncu, H200, session 7, bench/mxfp4/results-dense-small-2026-12-01-s7.md):
// kernel 9 at 7168x18432, 16 tokens runs 224 CTAs of 8 warps, at most 2 per SM
// (13.4 warps per SM achieved), so the time is one warp's chain: 18 batches
// of 2 K tiles, each = issue its loads, wait for all of them (3.4 of the 7.5
// cycles between a warp's instructions wait on L1TEX), then ~300 instructions
// of dequant and MMA with nothing in flight.
//
// A ring of register stages (loads of tile i + kD issued before tile i is
// computed) does not pipeline: ptxas puts every LDG of the loop on one
// scoreboard and a scoreboard wait is "all of them", so the first use of tile
// i waited for tile i + kD too (SASS of session 8's first version: every LDG
// `wb5`, the first dequant instruction `wait SB5`; measured 2-30% slower than
// kernels 8 and 9). cp.async groups complete in order and `cp.async.wait_group
// N` waits for all but the newest N, so here each lane copies its own operand
// bytes of a tile (weights, its scale word, a share of the activations) into
// a per-warp shared-memory ring of kD + 1 stages, kD tiles ahead, and the
// warp reads them back with LDS. No registers are held for the tiles in
// flight.
#pragma once
#include "cuda/mxfp4_device.cuh"

namespace mx::cuda::dev {

// Bytes of one ring stage of a warp: NS strips' codes (512 each) and scale
// words (32 lanes x 4), NT token groups' activations (2 x 512 each).
template <int NS, int NT>
constexpr int pipe_stage_bytes() {
  return NS * (kTileCodeBytes + 128) + NT * 1024;
}
template <int NS, int NT, int kD>
constexpr int pipe_ring_bytes() {
  return (kD + 1) * pipe_stage_bytes<NS, NT>();
}

// 16 bytes global -> shared, cached in L1 too (activations: the other CTAs of
// the SM read the same K range of x).
__device__ __forceinline__ void cp_async_16_ca(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// Accumulates K tiles [kt0, kt1) (kt1 > kt0) of NS strips into acc[s] for
// the tokens of x [M, K] (M <= 8 NT); strip s's tiles start s * KT tiles after
// strip 0's (codes / scales point at strip 0's first tile). ring: this warp's
// pipe_ring_bytes<NS, NT, kD>() of shared memory (16-byte aligned). On return
// no copy is in flight.
//
// Activations: lane (g, t) of the MMA needs 16-byte chunks 2t and 2t + 1 of
// token row g's 128 bytes per tile; loading them so (kernel 9) makes each
// 16-byte load touch 8 rows = 8 L1 wavefronts. Here the copies are cut by row
// instead: copy j of a lane brings chunk lane % 8 of row 4j + lane / 8, so a
// warp's copy reads 4 whole 128-byte rows (4 wavefronts), and puts it where
// the consumer lane reads it ([group][chunk parity][lane] x 16 bytes: one
// conflict-free LDS.128 per group and half). Lanes then read what others
// copied: a warp barrier after each wait (which also orders the previous
// tile's reads before the refill of its stage). Padding tokens copy row 0
// (their columns are never stored).
template <int NS, int NT, bool kBig, int kD>
__device__ __forceinline__ void pipe_mma(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                         int KT, int kt0, int kt1, const uint16_t* __restrict__ x, int M, int K,
                                         float (&acc)[NS][NT][4], uint8_t* ring) {
  constexpr int S = kD + 1, kStage = pipe_stage_bytes<NS, NT>();
  constexpr int kScaleOff = NS * kTileCodeBytes, kActOff = NS * (kTileCodeBytes + 128);
  constexpr int kActCopies = 2 * NT;  // 16-byte activation copies per lane and tile
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Sources of the next tile to copy.
  const uint8_t* wsrc[NS];
  const uint8_t* ssrc[NS];
#pragma unroll
  for (int q = 0; q < NS; ++q) {
    const size_t tile = size_t(q) * KT + kt0;
    wsrc[q] = codes + tile * kTileCodeBytes + lane * 16;
    // The 4-byte word holding this lane's 16-bit scale pair (u16 index (t/2)*8 + g).
    ssrc[q] = scales + tile * kTileScaleBytes + (t >> 1) * 16 + (g >> 1) * 4;
  }
  const int chunk = lane & 7, row_in_copy = lane >> 3;
  const uint16_t* xsrc[kActCopies];
#pragma unroll
  for (int j = 0; j < kActCopies; ++j) {
    const int token = 4 * j + row_in_copy;
    xsrc[j] = x + (token < M ? size_t(token) * K : 0) + size_t(kt0) * kTileK + 8 * chunk;
  }
  // Copy j lands in group j / 2, rows 4 (j % 2) + lane / 8, chunk parity
  // chunk % 2, consumer lane 4 * row + chunk / 2.
  const uint32_t act_dst = kActOff + ((chunk & 1) * 32 + 4 * row_in_copy + (chunk >> 1)) * 16;
  const uint32_t base = smem_addr(ring);
  const int n = kt1 - kt0;
  // Copies tile `next` (if it exists) into stage st, then closes the group
  // (an empty group past the end keeps the wait counts uniform).
  auto issue = [&](int st, int next) {
    if (next < n) {
      const uint32_t s = base + st * kStage;
#pragma unroll
      for (int q = 0; q < NS; ++q) {
        cp_async_16(s + q * kTileCodeBytes + lane * 16, wsrc[q]);
        cp_async_4(s + kScaleOff + q * 128 + lane * 4, ssrc[q]);
        wsrc[q] += kTileCodeBytes;
        ssrc[q] += kTileScaleBytes;
      }
#pragma unroll
      for (int j = 0; j < kActCopies; ++j) {
        cp_async_16_ca(s + act_dst + (j >> 1) * 1024 + (j & 1) * 256, xsrc[j]);
        xsrc[j] += kTileK;
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int d = 0; d < kD; ++d) issue(d, d);
  for (int i = 0; i < n;) {
#pragma unroll
    for (int u = 0; u < S; ++u, ++i) {  // tile i sits in stage u = i % S
      if (i >= n) break;
      cp_async_wait<kD - 1>();  // tile i's group has landed (the kD - 1 newer may not)
      __syncwarp();             // ... for every lane; and tile i - 1's stage is read
      issue((u + kD) % S, i + kD);
      const uint32_t s = base + u * kStage;
      uint4 w[NS];
      uint32_t sc[NS];
      uint4 xa[NT][2];
#pragma unroll
      for (int q = 0; q < NS; ++q) {
        w[q] = lds128(s + q * kTileCodeBytes + lane * 16);
        const uint32_t word = lds32(s + kScaleOff + q * 128 + lane * 4);
        sc[q] = (g & 1) ? (word >> 16) : (word & 0xFFFFu);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xa[nt][0] = lds128(s + kActOff + (2 * nt) * 512 + lane * 16);
        xa[nt][1] = lds128(s + kActOff + (2 * nt + 1) * 512 + lane * 16);
      }
#pragma unroll
      for (int q = 0; q < NS; ++q) mma_tile<NT, kBig>(w[q], sc[q], xa, acc[q]);
    }
  }
  cp_async_wait<0>();
}

}  // namespace mx::cuda::dev
