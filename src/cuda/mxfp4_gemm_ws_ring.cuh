// Kernel 11's ring (mxfp4_gemm_ws.cu, included by it only): its constants,
// the shared-memory layout of a ring stage, the kernel's arguments, a CTA's
// range of (row block, stage) units, and the producer's cursor that fills a
// ring slot with bulk copies.
#pragma once
#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "cuda/dense_fp8_quant.h"
#include "cuda/host/mxfp4_bits.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_ws.h"
#include "cuda/tma_copy.cuh"

namespace mx::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRows = kWarps * kStripRows;  // 128
constexpr int kStageTiles = kRingStageTiles;  // K tiles per ring stage
constexpr int kMaxTokens = 64;

// Ring for kCtas resident CTAs per SM (1, 2 or 3), NT token rows, kSP
// strips per warp and kW consumer warps (the CTA's row block is 16 kW kSP
// rows). 16 consumer warps run one CTA per SM with the largest ring. kFp8:
// B is E4M3 (W4A4 on FP8 MMAs), a 16-byte chunk holds 16 K values, not 8.
template <int NT, int kCtas, int kSP, int kW = kWarps, bool kFp8 = false>
struct Layout {
  static constexpr int kStrips = kW * kSP;
  static constexpr int kRowsCta = kStrips * kStripRows;
  static constexpr int kRingBudget =
      kCtas == 1 ? (kW == 16 ? 224 : 200) * 1024 : kCtas == 2 ? 104 * 1024 : 70 * 1024;
  static constexpr int kChunk = NT * 16;      // one 16-byte-wide K chunk of NT rows
  static constexpr int kXTile = (kFp8 ? 4 : 8) * kChunk;   // B of one 64-wide K tile
  static constexpr int kCodes = kStageTiles * kTileCodeBytes;    // one strip's codes per stage
  static constexpr int kScales = kStageTiles * kTileScaleBytes;  // and its scales
  static constexpr int kXsOff = fp8_x_b_bytes(NT);  // FP8: the stage's unfold factors
  static constexpr int kCodeOff = kFp8 ? fp8_x_stage_bytes(NT) : kStageTiles * kXTile;
  static constexpr int kScaleOff = kCodeOff + kStrips * kCodes;
  static constexpr int kStage = kScaleOff + kStrips * kScales;
  static constexpr int kStageBytes = kStage;  // what a stage's copies deliver
  // At most 8 stages (FP8 up to 12 measured no faster at 12-16 tokens, session 24).
  static constexpr int kStages = std::min(8, kRingBudget / kStage);
  static constexpr int kRing = kStages * kStage;
  static constexpr int kPartLd = NT + 4;  // FP32 partial row stride (floats)
  static constexpr int kSmem = kRing + 16 * kStages;
  static_assert(kStages >= 3, "ring too shallow");
  static_assert(kRowsCta * kPartLd * 4 <= kRing, "the partial tile reuses the ring");
  static_assert(kStage % 128 == 0 && kXTile % 128 == 0, "bulk tensor copies want 128-byte alignment");
};


// Kernel arguments. The weights are read through two 2-D tensor maps of
// 8-byte elements (rows = strips): a stage of the CTA's 8 or 16 strips is one
// bulk tensor copy of codes (strips x 1 KB) and one of scales (strips x 64 B).
struct Params {
  CUtensorMap codes;   // [strips][K / 64 x 512 bytes], box = the CTA's strips x 1 KB
  CUtensorMap scales;  // [strips][K / 64 x 32 bytes], box = the CTA's strips x 64 B
  const uint8_t* xp;   // permuted x, NT x 128 bytes per K tile
  uint16_t* y;
  float* partials;     // stream-K: [CTA][warp][float4 i < kSP x NT / 8][lane], a contributor's part
  int* counters;       // stream-K: [row block][warp] contributors' counts, reset by the owner: zero between launches
  // W4A4 on FP8 MMAs (null otherwise): each weight row's largest scale byte
  // (the activations' unfold factors come with each stage's B: a stage's
  // sum is added as sum * factor, y = acc * fold_unscale(row_smax)).
  const uint8_t* row_smax = nullptr;
  int M, N, K;
};

// Hides how v was computed from ptxas: it keeps v in a register instead of
// recomputing it (from the thread index) inside the K loop, and cannot hoist
// what is computed from v out of a loop (end_segment).
__device__ __forceinline__ uint32_t opaque(uint32_t v) {
  asm volatile("" : "+r"(v));
  return v;
}

// The CTA's work: units u0 .. u1 - 1 of the (row block, stage) sequence,
// row-block major (stream-K: equal ranges over a grid of resident CTAs; K
// splits: one row block's stage range).
struct Range {
  int u0, u1, stages;
};

// Thread 0's cursor over the CTA's units: fills ring slot `slot` with the
// next stage (weights and B), all completing on the slot's `full` barrier.
// kMode: the production copies, or a probe's (weights only, B only).
template <int NT, int kCtas, int kSP, int kW, int kMode = kRingProduction, bool kFp8 = false>
struct Filler {
  using L = Layout<NT, kCtas, kSP, kW, kFp8>;
  static constexpr bool kWeights = kMode != kRingProbeBOnly;
  static constexpr bool kActs = kMode != kRingProbeWeightsOnly && kMode != kRingProbeWeightsNoFlush;
  static constexpr uint32_t kBBytes = L::kCodeOff;  // B (and, FP8, the unfold factors)
  static constexpr uint32_t kBytes = (kWeights ? L::kStageBytes - kBBytes : 0) + (kActs ? kBBytes : 0);
  int rb, j, stages;  // next unit's row block and stage

  __device__ __forceinline__ void weights(const Params& p, uint32_t smem0, uint32_t bars, int slot) const {
    const uint32_t full = bars + 8 * slot, base = smem0 + slot * L::kStage;
    dev::mbar_arrive_expect_tx(full, kBytes);
    if (!kWeights) return;
    dev::tma_2d(base + L::kCodeOff, p.codes, j * kStageTiles * (kTileCodeBytes / 8), rb * L::kStrips, full);
    dev::tma_2d(base + L::kScaleOff, p.scales, j * kStageTiles * (kTileScaleBytes / 8), rb * L::kStrips, full);
  }
  __device__ __forceinline__ void acts(const Params& p, uint32_t smem0, uint32_t bars, int slot) const {
    if (!kActs) return;
    dev::bulk_copy_g2s(smem0 + slot * L::kStage, p.xp + size_t(j) * kBBytes, kBBytes,
                       bars + 8 * slot);
  }
  __device__ __forceinline__ void next() {
    if (++j == stages) j = 0, ++rb;
  }
};


}  // namespace
}  // namespace mx::cuda
