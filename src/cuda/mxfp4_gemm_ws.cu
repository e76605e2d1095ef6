// Dense MXFP4 GEMM (W4A16) for 17..64 tokens on wgmma, every operand streamed
// by bulk copies through an mbarrier ring (GemmConfig kernel 11).
// Kernel 7 (mxfp4_gemm_wgmma.cu) runs ~148 instructions per 16-row x 64-K
// tile at 32 tokens (SASS, 2026-12-01), of which the dequant is ~57: the rest
// is the register copy of the next weight batch, the weight-load and
// activation-copy addressing, descriptors rebuilt per tile and a CTA barrier
// per batch (ncu: 45-55% issue, 0.8-0.9 eligible warps). Here a warp's K loop
// is the dequant, 4 wgmma and a few ring instructions per tile:
//   * x is first rewritten (permute_x_kernel, one small launch) into wgmma's
//     K-major no-swizzle layout with the weight layout's K order inside each
//     64-tile (mma_logical_col), [K tile][8-wide chunk][NT rows][16 bytes],
//     into a per-stream scratch (streamk_workspace); rows M..NT-1 are zeros.
//     The GEMM is launched with programmatic dependent launch: its first
//     weight copies go out while the permutation runs.
//   * CTA = 2 warpgroups = 8 warps = 8 strips = 128 weight rows, or (with a
//     producer warp, stream-K only) 4 warpgroups = 16 strips = 256 rows, or
//     16 strips as two per warp of 8, or 32 as two per warp of 16 beside the
//     producer (512 rows; both measured slower, selectable). The work is
//     the (row block, stage) sequence: stream-K gives each of the resident
//     CTAs an equal range of it (a row block cut between CTAs is summed
//     through FP32 partials in the scratch by its owner, the CTA holding its
//     first unit, at the end of that CTA's range; end_segment); K
//     splits give each CTA of a (row block, split) grid its stage range, the
//     splits of a row block forming a cluster that sums through distributed
//     shared memory (as kernel 7).
//   * Ring of kStages stages of 2 K tiles; a stage is three copies completing
//     on its `full` mbarrier: the CTA's strips' codes and scales (2-D tensor
//     copies, rows = strips, box = the CTA's strips) and B (one 1-D bulk
//     copy: the chunk layout makes a stage contiguous). Copies write through
//     the async proxy that wgmma reads, so no proxy fence and no per-thread
//     copy.
//   * A stage is given back (`empty`, one arrival per consumer warp) once the
//     wgmma that read it retired. The automatic stream-K plans
//     (choose_ring_plan) have a producer warp that refills each slot as soon
//     as every consumer gave it back (kStages - 1 ahead of the slowest
//     consumer); in the other plans (K splits, forced ones) thread 0 refills the slot of stage q - 2 while the CTA works on
//     stage q, so the ring runs kStages - 2 ahead.
//   * Per tile: LDS.128 + LDS.U16 of the weights (a stage's loads first),
//     dequant into one of two A register sets, 4 wgmma, commit, wait for the
//     previous tile's group.
// Files: the ring's layout, arguments and copies in mxfp4_gemm_ws_ring.cuh,
// the segment ends (y, stream-K partials, cluster sums) in
// mxfp4_gemm_ws_epilogue.cuh, the FP8 variant's activation quantizer in
// dense_fp8_quant.cu.
// Measured (H200, bench/mxfp4/results-dense-wide-2026-12-01-s7.md, -s8.md):
// see choose_ring_plan (cuda/host/dense_ring_plan.h); ncu and what would close the rest: docs/kernels.md.
#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/dense_fp8_quant.h"
#include "cuda/host/fp8_dense_layout.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/device_info.h"
#include "cuda/host/dense_ring_plan.h"
#include "cuda/host/streamk_ranges.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/tma_copy.cuh"
#include "cuda/mxfp4_gemm_small_workspace.h"
#include "cuda/mxfp4_gemm_ws.h"
#include "cuda/mxfp4_gemm_ws_epilogue.cuh"
#include "cuda/mxfp4_gemm_ws_ring.cuh"
#include "cuda/per_device_once.h"
#include "cuda/w4a4_fp8_wgmma.cuh"
#include "cuda/wgmma_rs_narrow.cuh"

namespace mx::cuda {

namespace {

// xp[(j * 8 + c) * NT + n] (16 bytes) = logical K chunk c of K tile j of x
// row n (zeros from row M on). Thread = (row n, K tile j): 128 contiguous
// bytes in, its 32 words put in MMA order in registers, 8 x 16 bytes out.
template <int NT>
__global__ void __launch_bounds__(256) permute_x_kernel(const uint16_t* __restrict__ x,
                                                        uint4* __restrict__ xp, int M, int K) {
  dev::griddep_launch_dependents();  // the GEMM may start its weight copies now
  const int id = blockIdx.x * 256 + threadIdx.x, n = id % NT, j = id / NT;
  if (j >= K / kTileK) return;
  uint32_t out[32] = {};
  if (n < M) dev::load_row_tile_mma_order(reinterpret_cast<const uint4*>(x + size_t(n) * K + size_t(j) * kTileK), out);
  dev::store_row_tile_chunks(xp, j, NT, n, out);
}

// The producer warp's loop (lane 0): the first S stages (weights before the
// wait for the permutation of x), then each later stage q into the slot of
// stage q - S as soon as every consumer warp gave that slot back. Unlike
// thread 0 of a consumer warp it waits for nothing but the ring, so the ring
// runs S - 1 stages ahead of the slowest warp.
template <class F>
__device__ __forceinline__ void produce(const Params& p, F f, uint32_t smem0, uint32_t bars, int n) {
  constexpr int S = F::L::kStages;
  F w = f;
  for (int q = 0; q < min(S, n); ++q, w.next()) w.weights(p, smem0, bars, q);
  dev::griddep_wait();
  for (int q = 0; q < min(S, n); ++q, f.next()) f.acts(p, smem0, bars, q);
  int slot = 0;
  uint32_t parity = 0;
  for (int q = S; q < n; ++q, f.next()) {
    dev::mbar_wait_parity(bars + 8 * (S + slot), parity);
    f.weights(p, smem0, bars, slot);
    f.acts(p, smem0, bars, slot);
    if (++slot == S) slot = 0, parity ^= 1;
  }
  // Every copy is out: a next kernel launched with programmatic dependent
  // launch (the FP8 variant's quantizer of the next call) may start while the
  // consumers still write y, the partials and the counters. Rule: a kernel
  // launched with PDL right after this one must wait (griddepcontrol.wait)
  // before it reads or writes anything this one touches (the quantizer and
  // the strip kernels do; the fused MoE's gate_up zeroes `out` before its
  // wait and is never launched right after a dense GEMM).
  dev::griddep_launch_dependents();
}

// kStreamK: grid of resident CTAs, each an equal range of units (row blocks
// cut anywhere, partials through Params::partials); else grid (row blocks,
// K splits), clusters of the splits. kW consumer warps; kProd: one more warp
// fills the ring (stream-K; one strip per warp, or two with 16 consumer
// warps), else thread 0 refills it between its own MMAs. kMode: the kernel or
// a timing probe (DenseRingMode). kFp8: W4A4 on FP8 MMAs (B the folded E4M3
// activations, A the FP8 dense layout's codes folded per block in
// registers, each stage's sum of the tensor cores added into FP32).
template <int NT, bool kBig, int kCtas, bool kStreamK, int kSP, int kW = kWarps, bool kProd = false,
          int kMode = kRingProduction, bool kFp8 = false>
__global__ void __launch_bounds__((kW + kProd) * 32, kCtas) dense_ws_kernel(const __grid_constant__ Params p) {
  static_assert(!kProd || kStreamK, "the producer warp runs with stream-K");
  static_assert(!kFp8 || (kProd && kSP == 1 && !kBig), "the FP8 variant runs with the producer warp, one strip per warp");
  static_assert(!kFp8 || kMode == kRingProduction || kMode == kRingProbeNoMma || kMode == kRingProbeCopies ||
                    kMode == kRingProbeNoEnds,
                "the FP8 variant's probes: no MMA, copies only, no segment ends");
  static_assert(kProd || kW == kWarps, "16 consumer warps need the producer warp");
  static_assert(kMode == kRingProduction || (kProd && kSP == 1), "the probes run with the producer, one strip per warp");
  // The probes whose consumers only wait for each stage and give it back.
  constexpr bool kCopiesOnly = kMode == kRingProbeCopies || kMode == kRingProbeWeightsOnly ||
                               kMode == kRingProbeBOnly || kMode == kRingProbeWeightsNoFlush;
  using L = Layout<NT, kCtas, kSP, kW, kFp8>;
  constexpr int S = L::kStages;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  Range r;
  r.stages = p.K / kTileK / kStageTiles;
  if constexpr (kStreamK) {
    const int units = (p.N / L::kRowsCta) * r.stages;
    r.u0 = streamk_start(blockIdx.x, units, gridDim.x);
    r.u1 = streamk_start(blockIdx.x + 1, units, gridDim.x);
  } else {
    const int splits = gridDim.y, split = blockIdx.y;
    r.u0 = blockIdx.x * r.stages + split * r.stages / splits;
    r.u1 = blockIdx.x * r.stages + (split + 1) * r.stages / splits;
  }
  const int n = r.u1 - r.u0;  // stages this CTA runs
  const uint32_t smem0 = dev::smem_addr(smem);
  const uint32_t bars = smem0 + L::kRing;  // full[S], then empty[S]
  Filler<NT, kCtas, kSP, kW, kMode, kFp8> f;
  f.stages = r.stages;
  f.rb = r.u0 / r.stages;
  f.j = r.u0 % r.stages;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      dev::mbar_init(bars + 8 * s, 1);
      dev::mbar_init(bars + 8 * (S + s), kW);
    }
    dev::fence_mbar_init();
  }
  if constexpr (kProd) {
    __syncthreads();  // the barriers are initialized
    // The warp index broadcast from lane 0 tells ptxas the branch is
    // warp-uniform; from `tid >> 5` it took the consumers' code after it for
    // divergent and moved every wgmma descriptor through R2UR (16 per stage).
    if (__shfl_sync(0xffffffffu, warp, 0) == kW) {
      if (lane == 0) produce(p, f, smem0, bars, n);
      return;
    }
  } else if (tid == 0) {
    // The weights do not depend on the previous launch (the permutation of
    // x): request the first stages' before waiting for it.
    auto w = f;
    for (int q = 0; q < min(S, n); ++q, w.next()) w.weights(p, smem0, bars, q);
    dev::griddep_wait();
    for (int q = 0; q < min(S, n); ++q, f.next()) f.acts(p, smem0, bars, q);
  }
  if (!kProd) __syncthreads();

  float acc[kSP][NT / 2];
  auto zero_accumulators = [&] {
#pragma unroll
    for (int m = 0; m < kSP; ++m)
#pragma unroll
      for (int i = 0; i < NT / 2; ++i) acc[m][i] = 0.f;
  };
  const uint64_t desc0 = dev::kmajor_b_desc(smem0, L::kChunk);  // one chunk of NT rows between K chunks
  // Strip m * kW + warp of the row block: warpgroup wg's m64 tile m is strips
  // m * kW + 4 wg .. + 3.
  const uint32_t wcode = opaque(smem0 + L::kCodeOff + warp * L::kCodes + lane * 16);
  const uint32_t wscale = opaque(smem0 + L::kScaleOff + warp * L::kScales + (t >> 1) * 16 + 2 * g);
  // Two A register sets: with one strip per warp, tile u's; with two, strip
  // m's (strip 1 is dequantized while strip 0's group runs and vice versa).
  uint32_t a[2][4][4];
  int s = 0, rs = 0;  // slot of stage q, slot of stage q - 2 (refilled at q)
  uint32_t ph = 0, rph = 0;
  // FP8: per-row constants of the fold tables of this warp's rows g and
  // g + 8 (fp8_dense_lo_base ...), set at each segment's start.
  uint32_t fold_base[4] = {};
  // The largest scales of rows g and g + 8 of this warp's strip in row block
  // rb (a byte each). At 16 tokens they are loaded a segment ahead (the first
  // stage's dequant of a segment waits for them): session 25, H200,
  // 7168x18432 at 12 / 16 tokens 25.4 / 25.5 us against 26.5; at 32 tokens
  // the loop's extra register cost more than that (36864x7168 46.4-46.6
  // against 45.6-46.1; at 64 it ran 60.1 against 61.3-61.9, but beside a
  // baseline at a lower clock), so 32 and 64 tokens load them at the
  // segment's start.
  auto row_smax_pair = [&](int rb) -> uint32_t {
    const size_t row = (size_t(rb) * kW + warp) * kStripRows + g;
    return uint32_t(p.row_smax[row]) | uint32_t(p.row_smax[row + 8]) << 8;
  };
  auto set_fold_rows = [&](uint32_t pair) {
    const int sg = pair & 0xFF, sh = pair >> 8;
    fold_base[0] = fp8_dense_lo_base(sg), fold_base[1] = fp8_dense_hi_base(sg);
    fold_base[2] = fp8_dense_lo_base(sh), fold_base[3] = fp8_dense_hi_base(sh);
  };

  // FP8: the current stage's weights, loaded at its start.
  uint4 fwv[kStageTiles];
  uint32_t fsc[kStageTiles];
  auto fp8_load_stage = [&]() {
    dev::mbar_wait_parity(bars + 8 * s, ph);
    const uint32_t off = s * L::kStage;
#pragma unroll
    for (int u = 0; u < kStageTiles; ++u) {
      fwv[u] = dev::lds128(wcode + off + u * kTileCodeBytes);
      fsc[u] = dev::lds_u16(wscale + off + u * kTileScaleBytes);
    }
  };
  // Tile u of the current stage folded into E4M3 A registers ab (7
  // instructions per word, host/fp8_dense_layout.h): ab[k32 step][a0..a3].
  // (Session 25: a second set, the next stage dequantized under this stage's
  // MMAs, was no faster at 12-16 tokens, slower at 32 and spilled at 64:
  // bench/gpu/2026-12-03-session25/call1-probes-pipelined.)
  uint32_t fa[kStageTiles][2][4];
  auto fp8_dequant_tile = [&](int u, uint32_t(&ab)[2][4]) {
    const uint32_t sg = fsc[u] & 0xFF, sh = fsc[u] >> 8;
    const uint32_t glo = sg * kFp8DenseLoStep + fold_base[0], ghi = sg * kFp8DenseHiStep + fold_base[1];
    const uint32_t hlo = sh * kFp8DenseLoStep + fold_base[2], hhi = sh * kFp8DenseHiStep + fold_base[3];
#pragma unroll
    for (int st = 0; st < 2; ++st) {
      fp8_dense_word_to_e4m3(dev::word_of(fwv[u], 2 * st), glo, ghi, ab[st][0], ab[st][2]);
      fp8_dense_word_to_e4m3(dev::word_of(fwv[u], 2 * st + 1), hlo, hhi, ab[st][1], ab[st][3]);
    }
  };
  // Tile u's two k32 MMAs (B from the current stage's slot) into `part`, the
  // first one restarting it when `fresh`, committed as one group.
  auto fp8_mma_tile = [&](int u, const uint32_t(&ab)[2][4], float(&part)[NT / 2], bool fresh) {
    dev::wgmma_fence();
    const uint64_t d = desc0 + ((s * L::kStage + u * L::kXTile) >> 4);
#pragma unroll
    for (int st = 0; st < 2; ++st)
      dev::wgmma_rs_e4m3_tokens<NT>(part, ab[st], d + ((2 * st * L::kChunk) >> 4), !(fresh && st == 0));
    dev::wgmma_commit();
  };
  // acc += part * the stage's unfold factors of this lane's tokens (8i + 2t
  // and + 1, read from the slot per i: all at once they spilled at 64 tokens).
  auto add_part = [&](float(&part)[NT / 2]) {
    dev::fence_accumulators(part);
    const uint32_t xs = smem0 + s * L::kStage + L::kXsOff + 8 * t;
#pragma unroll
    for (int i = 0; i < NT / 8; ++i) {
      const float2 f = dev::lds_f32x2(xs + 32 * i);
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[0][4 * i + c] = fmaf(part[4 * i + c], (c & 1) ? f.y : f.x, acc[0][4 * i + c]);
    }
  };
  // Stages [q, q1) of one segment. The FP8 MMAs keep ~14 bits of their own
  // sums (docs/w4a4-fp8.md), so each stage's sum (128 K) is drained and
  // added into the FP32 accumulators. (Session 24 measured two other
  // schemes, both slower or no faster: every second stage drained, and a
  // stage's sum added during the next stage from a second register set,
  // which ptxas serializes, C7514; bench/gpu/2026-12-03-session24/call2-promotion.)
  float part[NT / 2];
  auto give_back_stage = [&] {
    if (lane == 0) dev::mbar_arrive(bars + 8 * (S + s));  // the slot is given back
    if (++s == S) s = 0, ph ^= 1;
  };
  auto fp8_segment = [&](int& q, int q1) {
    for (; q < q1; ++q) {
      if constexpr (kMode == kRingProbeCopies) {
        dev::mbar_wait_parity(bars + 8 * s, ph);  // probe: the slot is given back as soon as it is full
      } else if constexpr (kMode == kRingProbeNoMma) {
        fp8_load_stage();  // probe: the dequant kept (its registers used by an empty asm), no MMA, no drain
#pragma unroll
        for (int u = 0; u < kStageTiles; ++u) {
          fp8_dequant_tile(u, fa[u]);
          asm volatile("" ::"r"(fa[u][0][0]), "r"(fa[u][0][1]), "r"(fa[u][0][2]), "r"(fa[u][0][3]),
                       "r"(fa[u][1][0]), "r"(fa[u][1][1]), "r"(fa[u][1][2]), "r"(fa[u][1][3]));
        }
      } else {
        fp8_load_stage();
        fp8_dequant_tile(0, fa[0]);
        fp8_mma_tile(0, fa[0], part, true);
        fp8_dequant_tile(1, fa[1]);
        fp8_mma_tile(1, fa[1], part, false);
        dev::wgmma_wait<0>();
        add_part(part);
      }
      give_back_stage();
    }
  };
  // Stage q: its weights dequantized and its MMAs issued; stage q - 1's slot
  // given back and stage q - 2's refilled.
  auto run_stage = [&](int q) {
    dev::mbar_wait_parity(bars + 8 * s, ph);
    if constexpr (kCopiesOnly) {
      // Probe: the copies alone (the slot is given back as soon as it is full).
      if (lane == 0) dev::mbar_arrive(bars + 8 * (S + s));
    } else {
      const uint32_t off = s * L::kStage;
      uint4 wv[kStageTiles][kSP];  // the whole stage's weights first: one shared-memory latency per stage
      uint32_t sc[kStageTiles][kSP];
#pragma unroll
      for (int u = 0; u < kStageTiles; ++u)
#pragma unroll
        for (int m = 0; m < kSP; ++m) {
          wv[u][m] = dev::lds128(wcode + off + m * kW * L::kCodes + u * kTileCodeBytes);
          sc[u][m] = dev::lds_u16(wscale + off + m * kW * L::kScales + u * kTileScaleBytes);
        }
#pragma unroll
      for (int u = 0; u < kStageTiles; ++u)
#pragma unroll
      for (int m = 0; m < kSP; ++m) {
        uint32_t(&ab)[4][4] = a[(u * kSP + m) & 1];
        if constexpr (kMode == kRingProbeNoDequant) {
          // Probe: the code words themselves as A (no dequant; wrong sums).
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            ab[kk][0] = wv[u][m].x, ab[kk][1] = wv[u][m].y, ab[kk][2] = wv[u][m].z, ab[kk][3] = wv[u][m].w;
        } else {
          const dev::ScaleMul mul = dev::scale_multipliers<kBig>(sc[u][m]);
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(wv[u][m], kk), mul, ab[kk]);
        }
        if constexpr (kMode == kRingProbeNoMma) {
          // Probe: the dequant kept (its registers used by an empty asm), no MMA.
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            asm volatile("" ::"r"(ab[kk][0]), "r"(ab[kk][1]), "r"(ab[kk][2]), "r"(ab[kk][3]));
        } else {
          dev::wgmma_fence();
          const uint64_t d = desc0 + ((off + u * L::kXTile) >> 4);
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            dev::wgmma_rs_bf16_tokens<NT>(acc[m], ab[kk], d + ((2 * kk * L::kChunk) >> 4));
          dev::wgmma_commit();
          // The previous group is done: its A registers are rewritten next.
          dev::wgmma_wait<1>();
        }
        if (u == 0 && m == 0 && q > 0) {
          // Stage q - 1's last group retired: give its slot back. Thread 0 then
          // refills the slot of stage q - 2 (every warp gave it back during
          // stage q - 1, so the wait is short).
          if (lane == 0) dev::mbar_arrive(bars + 8 * (S + (s == 0 ? S - 1 : s - 1)));
          if (!kProd && q >= 2) {
            if (tid == 0 && q - 2 + S < n) {
              dev::mbar_wait_parity(bars + 8 * (S + rs), rph);
              f.weights(p, smem0, bars, rs);
              f.acts(p, smem0, bars, rs);
              f.next();
            }
            __syncwarp();  // the warp reconverges before the next aligned wgmma
            if (++rs == S) rs = 0, rph ^= 1;
          }
        }
      }
    }
    if (++s == S) s = 0, ph ^= 1;
  };
  if constexpr (kStreamK && kSP == 1) {
    // One pass per row-block segment [seg0, seg1) of this CTA's units. The
    // accumulators are zeroed (and, in the fix-up, added to) outside the
    // stage loop: redefined inside it, ptxas waited for every MMA group at
    // the end of each stage (C7517) so that no group was left in flight.
    constexpr bool kRowsAhead = kFp8 && NT == 16;
    uint32_t next_rows = kRowsAhead ? row_smax_pair(r.u0 / r.stages) : 0;  // the next segment's row scales
    for (int q = 0, rb = r.u0 / r.stages; q < n; ++rb) {
      const int seg0 = r.u0 + q, seg1 = min(r.u1, (rb + 1) * r.stages);
      zero_accumulators();
      if constexpr (kFp8) {
        set_fold_rows(kRowsAhead ? next_rows : row_smax_pair(rb));
        if (kRowsAhead && seg1 < r.u1) next_rows = row_smax_pair(rb + 1);  // loaded under this segment's stages
        fp8_segment(q, seg1 - r.u0);
      } else {
        for (; r.u0 + q < seg1; ++q) run_stage(q);
      }
      dev::wgmma_wait<0>();
#pragma unroll
      for (int m = 0; m < kSP; ++m) dev::fence_accumulators(acc[m]);
      if constexpr (kMode == kRingProbeNoEnds) {
        // Probe: the sums kept (a store no real sum takes), so that the
        // compiler keeps the dequant and MMAs that make them.
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < NT / 2; ++i) sum += acc[0][i];
        if (sum == -1.25e-37f) p.y[0] = 0;
      } else if constexpr (kMode != kRingProbeWeightsNoFlush) {
        end_segment<NT, kSP, kW, kMode>(p, r, rb, seg0, seg1, acc);
      }
    }
  } else if constexpr (kStreamK) {
    // Two strips per warp: the segment loop above makes ptxas serialize
    // every wgmma (C7513), so the stage loop stays whole and keeps the
    // per-stage wait (C7517).
    zero_accumulators();
    for (int q = 0, rb = r.u0 / r.stages, seg0 = r.u0; q < n; ++q) {
      run_stage(q);
      const int unit = r.u0 + q + 1;
      if (unit % r.stages == 0 || q == n - 1) {  // the row block's segment ends here
        dev::wgmma_wait<0>();
#pragma unroll
        for (int m = 0; m < kSP; ++m) dev::fence_accumulators(acc[m]);
        end_segment<NT, kSP, kW, kMode>(p, r, rb, seg0, unit, acc);
        zero_accumulators();
        ++rb;
        seg0 = unit;
      }
    }
  } else {
    zero_accumulators();
    for (int q = 0; q < n; ++q) run_stage(q);
    dev::wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < kSP; ++m) dev::fence_accumulators(acc[m]);
    const int rb = r.u0 / r.stages;
    if (gridDim.y == 1) store_y<NT, kSP, kW>(p, rb, acc);
    else cluster_epilogue<NT, kCtas, kSP>(p, smem, rb, acc);
  }
}

using Plan = RingPlan;  // the automatic rule: choose_ring_plan (cuda/host/dense_ring_plan.h)

// Where a pass's scratch lives: the permuted x, then the stream-K partials.
struct Scratch {
  uint8_t* xp;
  float* partials;
  size_t partial_bytes;  // room for every stream-K CTA's slot (launch_pass checks its grid against it)
  int* counters;
};

constexpr size_t xp_bytes(int64_t K) { return (size_t(kMaxTokens) * size_t(K) * 2 + 255) / 256 * 256; }
// One slot per CTA, every consumer thread its strips' accumulators (at most
// 32 floats); 3 CTAs of 8 consumer warps is the most per SM (16 warps: 1 CTA).
// launch_pass checks that its grid's slots fit.
constexpr size_t partial_bytes(int ctas) { return size_t(ctas) * kThreads * 32 * 4; }

// The weights' tensor maps (rows = strips, 8-byte elements): a box = a CTA's
// `cta_strips` strips x one stage of K tiles.
void encode_weight_maps(Params& p, const Mxfp4DeviceWeight& w, int cta_strips) {
  const int64_t KT = w.cols / kTileK, strips = w.rows / kStripRows;
  p.codes = tensor_map_2d("mxfp4_gemm", w.codes, uint64_t(KT) * kTileCodeBytes, strips,
                          kStageTiles * kTileCodeBytes / 8, cta_strips);
  p.scales = tensor_map_2d("mxfp4_gemm", w.scales, uint64_t(KT) * kTileScaleBytes, strips,
                           kStageTiles * kTileScaleBytes / 8, cta_strips);
}

// x permuted for NT token rows, then the GEMM launched with programmatic
// dependent launch (its prologue overlaps the permutation). splits 0 =
// stream-K over sm_count() * kCtas CTAs. kW consumer warps, kProd a producer
// warp (stream-K only).
template <int NT, bool kBig, int kCtas, int kSP, int kW = kWarps, bool kProd = false,
          int kMode = kRingProduction, bool kFp8 = false>
void launch_pass(Params p, const Mxfp4DeviceWeight& w, const uint16_t* x, const Scratch& scratch,
                 cudaStream_t stream, int splits) {
  using L = Layout<NT, kCtas, kSP, kW, kFp8>;
  // Two strips per warp and the producer warp only with stream-K: with K
  // splits ptxas serializes the wgmma of the 2-strip loop (C7513), so those
  // are not compiled.
  auto* split_kernel = kSP == 1 && !kProd ? dense_ws_kernel<NT, kBig, kCtas, false, 1> : nullptr;
  auto* stream_kernel = dense_ws_kernel<NT, kBig, kCtas, true, kSP, kW, kProd, kMode, kFp8>;
  auto* kernel = splits ? split_kernel : stream_kernel;
  if (!kernel)
    fail_input("mxfp4_gemm: kernel 11 runs 2 strips per warp and the producer warp with stream-K only (k_splits 0)");
  // The weights' box is this kernel's strips per CTA: a box smaller than the
  // kernel's stage would leave its barriers waiting for bytes that never come.
  if constexpr (kFp8) {
    Mxfp4DeviceWeight folded = w;
    folded.codes = w.fp8_codes;
    encode_weight_maps(p, folded, L::kStrips);
    // x null: a timing probe on the scratch's last quantized x (mxfp4_gemm_fp8).
    if (x) quantize_x_fp8(x, p.M, NT, p.K, scratch.xp, stream);
    p.row_smax = w.row_smax;
  } else {
    encode_weight_maps(p, w, L::kStrips);
    const int threads = NT * (p.K / kTileK);
    permute_x_kernel<NT><<<unsigned((threads + 255) / 256), 256, 0, stream>>>(
        x, reinterpret_cast<uint4*>(scratch.xp), p.M, p.K);
  }
  MX_CUDA_CHECK(cudaGetLastError());
  p.xp = scratch.xp;
  p.partials = scratch.partials;
  p.counters = scratch.counters;
  // Once per device: the shared-memory attribute, then the stream-K kernel's
  // CTAs per SM. Stream-K's grid is the CTAs resident at once (owners wait for
  // contributors with higher indices, cuda/host/streamk_ranges.h), taken from
  // the occupancy rather than assumed from kCtas.
  static PerDeviceOnce device_setup;
  static int resident_per_sm[64];
  const int device = device_setup([&](int device) {
    for (auto* k : {split_kernel, stream_kernel})
      if (k) MX_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmem));
    MX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident_per_sm[device], stream_kernel,
                                                                (kW + kProd) * 32, L::kSmem));
  });
  const int per_sm = std::min(kCtas, resident_per_sm[device]);
  if (!splits && per_sm < 1) fail_input("mxfp4_gemm: kernel 11 ({} consumer warps) does not fit on an SM", kW);
  const int sms = sm_count();
  const int blocks = p.N / L::kRowsCta;
  const int units = blocks * (p.K / kTileK / kStageTiles);
  const int ctas = streamk_grid(sms * std::max(per_sm, 1), units);
  // Every stream-K CTA's slot (kW warps x 32 lanes x its floats, partial_slot) inside the scratch.
  if (!splits && size_t(ctas) * kW * 32 * kSP * (NT / 2) * sizeof(float) > scratch.partial_bytes)
    fail_input("mxfp4_gemm: kernel 11's partial sums ({} CTAs x {} warps x {} floats) exceed its scratch", ctas, kW,
               kSP * NT / 2 * 32);
  const dim3 grid = splits ? dim3(unsigned(blocks), unsigned(splits)) : dim3(unsigned(ctas));
  launch_with(kernel, grid, (kW + kProd) * 32, L::kSmem, stream, LaunchAttrs{true, dim3(1, unsigned(splits ? splits : 1))},
              p);
}

// The compiled combinations: 3 CTAs per SM and 2 strips per warp up to 32
// tokens (registers), not both (launch_dense_ws refuses the others before
// anything runs; choose_ring_plan picks neither).
template <bool kBig>
void launch_plan(const Plan& plan, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                 const Scratch& scratch, cudaStream_t stream) {
  const int s = plan.splits;
  // A producer warp: 8 consumer warps with 2 CTAs per SM, or 16 with 1 (of
  // one strip each, or two: 512-row CTAs, small scales, up to 32 tokens).
  if (plan.ring_warps == 16 && plan.strips == 2) {
    if constexpr (!kBig) return launch_pass<32, false, 1, 2, 16, true>(p, w, x, scratch, stream, s);
    fail_input("mxfp4_gemm: kernel 11 runs two strips per warp of 16 consumer warps with small scales only");
  }
  if (plan.ring_warps == 16) {
    if (p.M <= 16) return launch_pass<16, kBig, 1, 1, 16, true>(p, w, x, scratch, stream, s);
    if (p.M <= 32) return launch_pass<32, kBig, 1, 1, 16, true>(p, w, x, scratch, stream, s);
    return launch_pass<64, kBig, 1, 1, 16, true>(p, w, x, scratch, stream, s);
  }
  if (plan.ring_warps == 8) {
    if (p.M <= 16) return launch_pass<16, kBig, 2, 1, 8, true>(p, w, x, scratch, stream, s);
    if (p.M <= 32) return launch_pass<32, kBig, 2, 1, 8, true>(p, w, x, scratch, stream, s);
    return launch_pass<64, kBig, 2, 1, 8, true>(p, w, x, scratch, stream, s);
  }
  if (plan.strips == 2) {
    if (p.M <= 16) return plan.ctas == 1 ? launch_pass<16, kBig, 1, 2>(p, w, x, scratch, stream, s)
                                         : launch_pass<16, kBig, 2, 2>(p, w, x, scratch, stream, s);
    return plan.ctas == 1 ? launch_pass<32, kBig, 1, 2>(p, w, x, scratch, stream, s)
                          : launch_pass<32, kBig, 2, 2>(p, w, x, scratch, stream, s);
  }
  if (plan.ctas == 3) {
    if (p.M <= 16) return launch_pass<16, kBig, 3, 1>(p, w, x, scratch, stream, s);
    return launch_pass<32, kBig, 3, 1>(p, w, x, scratch, stream, s);
  }
  if (p.M <= 16) return plan.ctas == 1 ? launch_pass<16, kBig, 1, 1>(p, w, x, scratch, stream, s)
                                       : launch_pass<16, kBig, 2, 1>(p, w, x, scratch, stream, s);
  if (p.M <= 32) return plan.ctas == 1 ? launch_pass<32, kBig, 1, 1>(p, w, x, scratch, stream, s)
                                       : launch_pass<32, kBig, 2, 1>(p, w, x, scratch, stream, s);
  return plan.ctas == 1 ? launch_pass<64, kBig, 1, 1>(p, w, x, scratch, stream, s)
                        : launch_pass<64, kBig, 2, 1>(p, w, x, scratch, stream, s);
}

// The timing probes (launch_dense_ws's `mode`; bench only), small scales: a
// producer warp beside 8 consumer warps with 2 CTAs per SM or 16 with 1.
template <int kMode>
void launch_probe(int ring_warps, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                  const Scratch& scratch, cudaStream_t stream) {
  if (ring_warps == 16) {
    if (p.M <= 32) return launch_pass<32, false, 1, 1, 16, true, kMode>(p, w, x, scratch, stream, 0);
    return launch_pass<64, false, 1, 1, 16, true, kMode>(p, w, x, scratch, stream, 0);
  }
  if (p.M <= 32) return launch_pass<32, false, 2, 1, 8, true, kMode>(p, w, x, scratch, stream, 0);
  return launch_pass<64, false, 2, 1, 8, true, kMode>(p, w, x, scratch, stream, 0);
}

// launch_probe for a run-time mode (not kRingProduction).
void launch_probe_mode(int mode, int ring_warps, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                       const Scratch& scratch, cudaStream_t stream) {
  switch (mode) {
    case kRingProbeNoMma: return launch_probe<kRingProbeNoMma>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeNoDequant: return launch_probe<kRingProbeNoDequant>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeCopies: return launch_probe<kRingProbeCopies>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeWeightsOnly: return launch_probe<kRingProbeWeightsOnly>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeBOnly: return launch_probe<kRingProbeBOnly>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeWeightsNoFlush: return launch_probe<kRingProbeWeightsNoFlush>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeDropCut: return launch_probe<kRingProbeDropCut>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeStoreCut: return launch_probe<kRingProbeStoreCut>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeNoWholeY: return launch_probe<kRingProbeNoWholeY>(ring_warps, p, w, x, scratch, stream);
    case kRingProbeNoEnds: return launch_probe<kRingProbeNoEnds>(ring_warps, p, w, x, scratch, stream);
    default: fail_input("mxfp4_gemm: kernel 11 has no probe mode {}", mode);
  }
}

// The FP8 variant's compiled combinations: a producer warp beside 8
// consumer warps (2 CTAs per SM) or 16 (1 CTA per SM), 16, 32 or 64 tokens;
// its timing probes (17..64 tokens) no MMA, copies only, no segment ends.
template <int NT, int kMode>
void launch_fp8_pass(int ring_warps, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                     const Scratch& scratch, cudaStream_t stream) {
  if (ring_warps == 16) return launch_pass<NT, false, 1, 1, 16, true, kMode, true>(p, w, x, scratch, stream, 0);
  return launch_pass<NT, false, 2, 1, 8, true, kMode, true>(p, w, x, scratch, stream, 0);
}

template <int NT>
void launch_fp8_mode(const Fp8RingOptions& o, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                     const Scratch& scratch, cudaStream_t stream) {
  const int rw = o.ring_warps;
  if constexpr (NT > 16) {
    switch (o.probe) {
      case kRingProduction: break;
      case kRingProbeNoMma: return launch_fp8_pass<NT, kRingProbeNoMma>(rw, p, w, x, scratch, stream);
      case kRingProbeCopies: return launch_fp8_pass<NT, kRingProbeCopies>(rw, p, w, x, scratch, stream);
      case kRingProbeNoEnds: return launch_fp8_pass<NT, kRingProbeNoEnds>(rw, p, w, x, scratch, stream);
      default: fail_input("mxfp4_gemm: the FP8 ring kernel's probes are modes {}, {} and {}, got {}",
                          int(kRingProbeNoMma), int(kRingProbeCopies), int(kRingProbeNoEnds), o.probe);
    }
  } else if (o.probe) {
    fail_input("mxfp4_gemm: the FP8 ring kernel's probes run 17..64 tokens a pass, got {}", p.M);
  }
  launch_fp8_pass<NT, kRingProduction>(rw, p, w, x, scratch, stream);
}

void launch_fp8(const Fp8RingOptions& o, const Params& p, const Mxfp4DeviceWeight& w, const uint16_t* x,
                const Scratch& scratch, cudaStream_t stream) {
  if (p.M <= 16) return launch_fp8_mode<16>(o, p, w, x, scratch, stream);
  if (p.M <= 32) return launch_fp8_mode<32>(o, p, w, x, scratch, stream);
  return launch_fp8_mode<64>(o, p, w, x, scratch, stream);
}

// Scratch: x of one pass in the MMA's layout (64 token rows at most; the FP8
// variant's E4M3 rows and unfold factors take less), then the stream-K
// partials (at most 3 CTAs per SM). False when it cannot grow (capture).
bool ring_scratch(const Mxfp4DeviceWeight& w, cudaStream_t stream, Scratch& scratch) {
  const size_t partials = partial_bytes(3 * sm_count());
  StreamKWorkspace ws;
  if (!streamk_workspace(stream, xp_bytes(w.cols) + partials, (w.rows / kRows) * kWarps, ws)) return false;
  scratch.xp = reinterpret_cast<uint8_t*>(ws.partials);
  scratch.partials = reinterpret_cast<float*>(scratch.xp + xp_bytes(w.cols));
  scratch.partial_bytes = partials;
  scratch.counters = ws.counters;
  return true;
}

}  // namespace

bool dense_ws_supported(const Mxfp4DeviceWeight& w) {
  return w.rows % kRows == 0 && w.cols % (kStageTiles * kTileK) == 0;
}

bool launch_dense_ws(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                     cudaStream_t stream, int k_splits, int ctas_per_sm, int strips_per_cta, int ring_warps,
                     int mode) {
  if (!dense_ws_supported(w))
    fail_input("mxfp4_gemm: kernel 11 needs N % {} == 0 and K % {} == 0, got [{}, {}]", kRows,
               kStageTiles * kTileK, w.rows, w.cols);
  const int stages = int(w.cols / (kStageTiles * kTileK));
  if (k_splits != 0 && k_splits != 1 && k_splits != 2 && k_splits != 4 && k_splits != 8)
    fail_input("mxfp4_gemm: kernel 11 takes k_splits 0 (stream-K), 1, 2, 4 or 8, got {}", k_splits);
  if (ctas_per_sm < 0 || ctas_per_sm > 3)
    fail_input("mxfp4_gemm: kernel 11 takes 1..3 CTAs per SM (batch_tiles), got {}", ctas_per_sm);
  // 32 strips per CTA: two per warp of 16 consumer warps (with the producer).
  const bool wide_pairs = strips_per_cta == 4 * kWarps;
  if (strips_per_cta != 0 && strips_per_cta != kWarps && strips_per_cta != 2 * kWarps && !wide_pairs)
    fail_input("mxfp4_gemm: kernel 11 takes {}, {} or {} strips per CTA, got {}", kWarps, 2 * kWarps, 4 * kWarps,
               strips_per_cta);
  if (wide_pairs && (ring_warps != 2 * kWarps || w.big_scales || k_splits || ctas_per_sm || std::min(M, kMaxTokens) > 32))
    fail_input("mxfp4_gemm: kernel 11 runs {} strips per CTA as two per warp of {} consumer warps (ring_warps {}), "
               "small scales, stream-K, up to 32 tokens; got ring_warps {}, big scales {}, k_splits {}, batch_tiles "
               "{}, {} tokens",
               4 * kWarps, 2 * kWarps, 2 * kWarps, ring_warps, w.big_scales, k_splits, ctas_per_sm, M);
  const int strips = wide_pairs ? 2 : strips_per_cta ? strips_per_cta / kWarps : 1;
  const int64_t row_block = int64_t(kRows) * strips * (ring_warps == 2 * kWarps ? 2 : 1);  // rows per CTA
  if (w.rows % row_block)
    fail_input("mxfp4_gemm: kernel 11 with {} strips per warp of {} consumer warps needs N % {} == 0, got {}", strips,
               ring_warps == 2 * kWarps ? 2 * kWarps : kWarps, row_block, w.rows);
  if (stages < k_splits)
    fail_input("mxfp4_gemm: {} stages of {} K tiles cannot be split {} ways", stages, kStageTiles, k_splits);
  // The compiled combinations (launch_plan), refused here, before anything
  // is allocated or launched: 3 CTAs per SM and 2 strips per warp up to 32
  // tokens, not both; 2 strips per warp with stream-K only.
  const int first_pass = std::min(M, kMaxTokens);
  if (strips == 2 && (k_splits != 0 || ctas_per_sm == 3 || first_pass > 32))
    fail_input("mxfp4_gemm: kernel 11 runs 2 strips per warp with stream-K (k_splits 0), up to 32 tokens and "
               "2 CTAs per SM, got k_splits {}, {} tokens, {} CTAs per SM", k_splits, M, ctas_per_sm);
  if (ctas_per_sm == 3 && first_pass > 32)
    fail_input("mxfp4_gemm: kernel 11 fits 3 CTAs per SM up to 32 tokens, got {}", M);
  if (ring_warps != 0 && ring_warps != kWarps && ring_warps != 2 * kWarps)
    fail_input("mxfp4_gemm: kernel 11 takes ring_warps 0, {} or {}, got {}", kWarps, 2 * kWarps, ring_warps);
  if (ring_warps && (k_splits != 0 || ctas_per_sm != 0 || (strips_per_cta != 0 && !wide_pairs)))
    fail_input("mxfp4_gemm: kernel 11 with a producer warp (ring_warps {}) runs stream-K, its own CTAs per SM, "
               "one strip per warp (or two: strips_per_cta {} with ring_warps {}): k_splits and batch_tiles must be "
               "0 and strips_per_cta 0, got {}, {}, {}",
               ring_warps, 4 * kWarps, 2 * kWarps, k_splits, ctas_per_sm, strips_per_cta);
  if (mode < kRingProduction || mode > kRingLastMode)
    fail_input("mxfp4_gemm: kernel 11 modes are {}..{}, got {}", int(kRingProduction), int(kRingLastMode), mode);
  if (mode != kRingProduction && (!ring_warps || w.big_scales || strips != 1 || M <= 16))
    fail_input("mxfp4_gemm: kernel 11's probes run with a producer warp (ring_warps 8 or 16), one strip per warp, "
               "small scales, 17..64 tokens a pass; got ring_warps {}, {} strips per warp, big scales {}, {} tokens",
               ring_warps, strips, w.big_scales, M);
  Params p;
  Scratch scratch;
  if (!ring_scratch(w, stream, scratch)) return false;
  const int sms = sm_count();
  const int64_t blocks = w.rows / kRows;
  p.N = int(w.rows);
  p.K = int(w.cols);
  for (int m0 = 0; m0 < M; m0 += kMaxTokens) {
    p.M = std::min(kMaxTokens, M - m0);
    p.y = y + size_t(m0) * w.rows;
    const uint16_t* xs = x + size_t(m0) * w.cols;
    // Forced: k_splits as given (0 = stream-K), CTAs per SM as given or 2.
    Plan plan = {k_splits, ctas_per_sm ? ctas_per_sm : 2, strips, ring_warps};
    if (!k_splits && !ctas_per_sm && !strips_per_cta && !ring_warps) plan = choose_ring_plan(blocks, stages, p.M, sms);
    if (mode != kRingProduction) launch_probe_mode(mode, plan.ring_warps, p, w, xs, scratch, stream);
    else if (w.big_scales) launch_plan<true>(plan, p, w, xs, scratch, stream);
    else launch_plan<false>(plan, p, w, xs, scratch, stream);
  }
  return true;
}

bool mxfp4_fp8_dense_supported(const Mxfp4DeviceWeight& w) {
  return dense_ws_supported(w) && w.cols <= kDenseFp8MaxK;
}

// Each pass quantizes x per 32 along K and writes it folded as E4M3 in the
// MMA's layout into the stream's scratch (dense_fp8_quant.cu), then
// kernel 11's FP8 variant multiplies it with w.fp8_codes (stream-K with a
// producer warp; ring_warps 8 or 16, 0 = the auto rule's).
bool mxfp4_gemm_fp8(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y, cudaStream_t stream,
                    Fp8RingOptions o) {
  if (!w.fp8_codes || !w.row_smax)
    fail_input("mxfp4_gemm: W4A4 on FP8 MMAs needs the weight's FP8 dense layout (pack_fp8_dense_device)");
  if (!mxfp4_fp8_dense_supported(w))
    fail_input("mxfp4_gemm: the FP8 ring kernel needs N % {} == 0, K % {} == 0 and K <= {}, got [{}, {}]", kRows,
               kStageTiles * kTileK, kDenseFp8MaxK, w.rows, w.cols);
  const int sms = sm_count();
  if (o.ring_warps == 0) o.ring_warps = ring_consumer_warps(w.rows / kRows, sms);
  if (o.ring_warps != kWarps && o.ring_warps != 2 * kWarps)
    fail_input("mxfp4_gemm: the FP8 ring kernel takes ring_warps 0, {} or {}, got {}", kWarps, 2 * kWarps,
               o.ring_warps);
  if (o.ring_warps == 2 * kWarps && w.rows % 256)
    fail_input("mxfp4_gemm: 16 consumer warps need N % 256 == 0, got {}", w.rows);
  Scratch scratch;
  if (!ring_scratch(w, stream, scratch)) return false;
  Params p;
  p.N = int(w.rows);
  p.K = int(w.cols);
  for (int m0 = 0; m0 < M; m0 += kMaxTokens) {
    p.M = std::min(kMaxTokens, M - m0);
    p.y = y + size_t(m0) * w.rows;
    launch_fp8(o, p, w, x ? x + size_t(m0) * w.cols : nullptr, scratch, stream);
  }
  return true;
}

}  // namespace mx::cuda
