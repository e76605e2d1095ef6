// gate_up of the warp-specialized MoE prefill (path 5) on wide items
// (MoeConfig::ws_gate_up_items 2), and down on the same items (its own
// section below: ws_down_items 2, 3): work item = 128 weight rows (8 strips) x
// one tile of up to 224 pairs of one expert (256 without Params::tail96),
// instead of 256 rows x up to 128 pairs (fused_moe_ws.cu).
// Why: at 8192 Kimi tokens an expert has ~171 pairs (129..221), so the
// 128-pair tiles cut it into a full item and a partial one of <= 64 pairs:
// every weight tile was loaded and dequantized twice, and the partial item
// dequantizes as much as a full one for half the MMAs. Here one item covers
// the expert: each warp dequantizes one strip per K tile (16 registers) and
// issues one wgmma group of m64 x n(R0 + R1 pairs) x k64 from those
// registers, so the weights are loaded and dequantized once per call and the
// tensor pipe gets 1.5-2x the MMAs per dequantized fragment. Padding: the
// pairs past 128 rounded up to 32, 48, 64 or 96 (rows_second, tail96: ~5% at
// 8192 tokens; 48, 64 or 128 before session 17: 8%; 14% in 64-row steps
// before session 14). Cost: B
// (the gathered x) is read by 32 row blocks per expert instead of 16 (from L2).
//   * Stage = B in two boxes of up to 128 pair rows (the second 32, 48, 64 or
//     96 rows with tail96, else 48, 64, 128 or absent; its own wgmma
//     descriptors) + 8 strips' code and scale tiles.
//     gate_up: 5 stages, filled by the producer warpgroup (fused_moe_ws.cuh);
//     down: DownStage, down_stages.
//   * 2 warpgroups x 64 rows: warp w of warpgroup wg owns strip 4 wg + w.
//   * kCluster 2 (MoeConfig::ws_gate_up_cluster 2, auto): clusters of 2
//     CTAs on adjacent row blocks of one tile share every B stage through
//     TMA multicast (copy_b and release_stage, fused_moe_ws.cuh), so an
//     expert's B is read from L2 by 16 row blocks instead of 32. The row
//     blocks, 2I / 128, are even (check_moe_prefill_ws_shape: 2I % 256 == 0).
//   * Epilogue: h = SiLU(gate) * up of the item's 64 h columns (= one K tile
//     of down's B) through one 32 KB staging area shared by both warpgroups
//     (their columns interleave in every 8-wide chunk), then whole 16-byte
//     rows into h's chunk layout.
// down runs on the same items (moe_ws_wide_down_kernel below, session 18)
// with the adders' epilogue; session 8's wide down with FP32 atomics in the
// MMA warps had run 7.23 vs 5.30 ms at 8192 Kimi tokens
// (bench/mxfp4/results-prefill-2026-12-01-s8.md). Without it, down runs on
// the 256-row items of fused_moe_ws.cu and the caller rewrites the tile map
// between the two GEMMs.
#include <cuda.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_internal.h"
#include "cuda/wgmma_rs_narrow.cuh"
#include "cuda/fused_moe_ws.cuh"

namespace mx::cuda::ws {

namespace {

constexpr int kWidePairs = 2 * kTilePairs;              // 256
constexpr int kHalfB = kActStage;                       // one box of 128 pair rows: 16 KB
constexpr int kWideCodes = kWideStrips * kTileCodeBytes;    // 4096
constexpr int kWideScales = kWideStrips * kTileScaleBytes;  // 256

// A wide stage of kBBytes of B (the box of the first 128 pair rows at 0, the
// second box at kHalfB), then the 8 strips' code and scale tiles.
template <int kBBytes>
struct WideStage {
  static constexpr int kCodes = kBBytes, kScales = kCodes + kWideCodes, kBytes = kScales + kWideScales;
  static_assert(kBytes % 128 == 0, "stages must stay 128-byte aligned for the copies");
};
// gate_up: room for two boxes of 128 rows in every stage.
using GateUpStage = WideStage<2 * kHalfB>;  // 37120 bytes
constexpr int kWideStages = 5;
constexpr int kHChunk = kWidePairs * 16;  // staging: 8 chunks x 256 rows x 16 bytes
constexpr int kWideSmem = kWideStages * GateUpStage::kBytes + 8 * kHChunk + 2 * kWideStages * 8;
static_assert(kWideSmem <= 227 * 1024, "shared memory of one SM exceeded");

// B boxes of an item: the first 128 pair rows (also for items of <= 64 pairs,
// rare at the token counts auto gives these items, where they now run twice
// the MMAs they need: a fifth item shape made ptxas serialize the wgmmas,
// C7512) and the rest in a box of box_rows(rest, fine_boxes) rows: none, 48,
// 64 or 128. (Session 8 rounded the second box to 32 with n = 32 and 96:
// C7512 or spills, not run.)
// kTail96 (Params::tail96, tiles of up to 224 pairs): the box past the first
// 128 is 32, 48, 64 or 96 rows (64 or 96 without fine boxes), also 32 for
// items of <= 128 pairs (its rows belong to the next expert or lie past the
// pairs, where the copy fills zeros: only discarded columns read them), so
// the kernel compiles four item shapes, as the 256-pair tiles' (128, 0),
// (128, 48), (128, 64) and (128, 128). At 8192 Kimi tokens (the rest of an
// expert's pairs past 128 ~ N(42.7, 12.9)) ~8.5 padded columns per expert
// instead of ~13.4: gate_up faster in 5 of 6 same-run comparisons, mean
// 1.5% (session 17, bench/mxfp4/results-prefill-2026-12-02-s17.md; auto up
// to 192 pairs per expert).
template <bool kTail96>
__device__ __forceinline__ int rows_second(const Params& p, int count) {
  if constexpr (kTail96) {
    const int rest = count - kTilePairs;
    if (!p.fine_boxes) return rest <= 64 ? 64 : 96;
    return rest <= 32 ? 32 : rest <= 48 ? 48 : rest <= 64 ? 64 : 96;
  } else {
    return count > kTilePairs ? box_rows(count - kTilePairs, p.fine_boxes) : 0;
  }
}
constexpr int wide_tile_pairs(bool tail96) { return tail96 ? kWideTail96Pairs : kWidePairs; }
// f(std::integral_constant<int, R1>) for an item whose second box has rows1
// rows (rows_second): one instantiation of the item per shape the kernels
// compile, four with the 224-pair tiles and four without.
template <bool kTail96, class F>
__device__ __forceinline__ void with_second_box(int rows1, F&& f) {
  using std::integral_constant;
  if constexpr (kTail96) {
    if (rows1 == 96) f(integral_constant<int, 96>{});
    else if (rows1 == 64) f(integral_constant<int, 64>{});
    else if (rows1 == 48) f(integral_constant<int, 48>{});
    else f(integral_constant<int, 32>{});
  } else {
    if (rows1 == 128) f(integral_constant<int, 128>{});
    else if (rows1 == 64) f(integral_constant<int, 64>{});
    else if (rows1 == 48) f(integral_constant<int, 48>{});
    else f(integral_constant<int, 0>{});
  }
}

// The copy cursor over the CTA's (item, K tile) sequence (as Producer in
// fused_moe_ws.cuh, with the wide stage layout), kS stages; B shared by a
// cluster of kCluster CTAs (copy_b).
template <int kS, int kCluster, bool kTail96, class Stage>
struct WideProducer {
  RingPosition<WideProducer, kS> at;
  int strip0, start, rows1;

  __device__ __forceinline__ void start_item(const Params& p, int item, int row_blocks) {
    const Item it = item_at<wide_tile_pairs(kTail96)>(p.s, item, row_blocks);
    strip0 = it.expert * (p.N / kStripRows) + it.rb * kWideStrips;
    start = it.start;
    rows1 = rows_second<kTail96>(p, it.count);
  }

  __device__ __forceinline__ void init(const Params& p, int items, int row_blocks) {
    at.init(*this, p, items, row_blocks);
  }

  __device__ __forceinline__ void issue(const Params& p, uint32_t base, uint32_t bars, int items,
                                        int row_blocks) {
    if (at.item >= items) return;
    const int st = at.st, j = at.j;
    const uint32_t full = bars + 8 * st;
    dev::mbar_wait_parity(bars + 8 * (kS + st), at.phase ^ 1);
    dev::mbar_arrive_expect_tx(full, kWideCodes + kWideScales + (kTilePairs + rows1) * 8 * 16);
    const uint32_t sb = base + st * Stage::kBytes;
    dev::tma_2d(sb + Stage::kCodes, p.codes, j * (kTileCodeBytes / 8), strip0, full);
    dev::tma_2d(sb + Stage::kScales, p.scales, j * (kTileScaleBytes / 8), strip0, full);
    copy_b<kCluster>(sb, p.act128, kTilePairs, start, j, full);
    if (rows1) copy_b<kCluster>(sb + kHalfB, act_box(p, rows1), rows1, start + kTilePairs, j, full);
    at.advance(*this, p, items, row_blocks);
  }
};

// K loop of one item for one warp: acc0 (pairs 0..127) and acc1 (128..R1 + 127)
// += strip (4 wg + w) x B. One wgmma group per K tile, dequantized while the
// previous one runs (wait_group 1, 2 A buffers); the stage of tile j - 1 is
// given back once its group retired.
template <int kS, int R0, int R1, bool kBig, int kCluster, class Stage, int N0, int N1>
__device__ __forceinline__ void consume_wide(const Params& p, uint32_t base, uint32_t bars, int strip,
                                             int& st, uint32_t& phase, float (&acc0)[N0], float (&acc1)[N1]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int KT = p.K / kTileK;
  uint32_t a[2][4][4];
  int prev = -1;
  // Two K tiles per turn, so that the buffer indices are constants (KT is even:
  // K % 256 == 0, check_moe_prefill_ws_shape).
  for (int j0 = 0; j0 < KT; j0 += 2) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      dev::mbar_wait_parity(bars + 8 * st, phase);
      const uint32_t sb = base + st * Stage::kBytes;
      const uint4 wv = dev::lds128(sb + Stage::kCodes + strip * kTileCodeBytes + lane * 16);
      const uint32_t sc = dev::lds_u16(sb + Stage::kScales + strip * kTileScaleBytes + (t >> 1) * 16 + 2 * g);
      const dev::ScaleMul mul = dev::scale_multipliers<kBig>(sc);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(wv, kk), mul, a[u][kk]);
      dev::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        dev::wgmma_rs_bf16_cols<R0>(acc0, a[u][kk], b_desc_rows<R0>(sb + kk * R0 * 32));
      if constexpr (R1 > 0) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          dev::wgmma_rs_bf16_cols<R1>(acc1, a[u][kk], b_desc_rows<R1>(sb + kHalfB + kk * R1 * 32));
      }
      dev::wgmma_commit();
      dev::wgmma_wait<1>();
      // Group j - 1 retired: its A buffer and its stage are free.
      keep_registers(a[u ^ 1]);
      if (prev >= 0) release_stage<kCluster>(bars + 8 * (kS + prev), lane);
      __syncwarp();  // the warp reconverges before the next aligned wgmma
      prev = st;
      if (++st == kS) st = 0, phase ^= 1;
    }
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc0);
  dev::fence_accumulators(acc1);
  if (prev >= 0) release_stage<kCluster>(bars + 8 * (kS + prev), lane);
}

// h = SiLU(gate) * up of the item's 8 strips (h's K tile rb) into the shared
// staging area in the chunk layout, then to h as whole 16-byte rows. Both
// warpgroups write every chunk, so the barriers span the CTA.
template <int kRows, int N>
__device__ __forceinline__ void stage_h(uint32_t staging, int col_base, int pair0, int w, const float (&acc)[N]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int lc = mma_logical_col(col_base + w * 8 + g);
  const uint32_t col = staging + (lc >> 3) * kHChunk + (lc & 7) * 2;
#pragma unroll
  for (int nb = 0; nb < kRows / 8; ++nb)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float gate = acc[4 * nb + j], up = acc[4 * nb + 2 + j];
      const float silu = gate / (1.f + __expf(-gate));
      sts16(col + (pair0 + nb * 8 + 2 * t + j) * 16, dev::float_to_bf16_bits(silu * up));
    }
}

template <int R0, int R1, int N0, int N1>
__device__ __forceinline__ void store_h_wide(const Params& p, const Item& it, uint32_t staging,
                                             const float (&acc0)[N0], const float (&acc1)[N1]) {
  const int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
  named_barrier(1, kThreads);  // the previous item's copy-out has read the staging area
  stage_h<R0>(staging, wg * 32, 0, w, acc0);
  if constexpr (R1 > 0) stage_h<R1>(staging, wg * 32, kTilePairs, w, acc1);
  named_barrier(1, kThreads);
  for (int q = threadIdx.x; q < 8 * it.count; q += kThreads) {
    const int c = q / it.count, n = q - c * it.count;
    p.h[(size_t(it.rb) * 8 + c) * p.R + it.start + n] = dev::lds128(staging + c * kHChunk + n * 16);
  }
}

template <int R0, int R1, bool kBig, int kCluster, int kS>
__device__ __forceinline__ void run_item(const Params& p, const Item& it, uint32_t base, uint32_t bars,
                                         uint32_t staging, int& st, uint32_t& phase) {
  const int strip = (threadIdx.x >> 7) * 4 + ((threadIdx.x >> 5) & 3);
  // Accumulators sized to the item's boxes (an unused tail of a 64-float
  // array made ptxas serialize the wgmmas: C7512).
  float acc0[R0 / 2], acc1[R1 > 0 ? R1 / 2 : 1];
#pragma unroll
  for (int i = 0; i < R0 / 2; ++i) acc0[i] = 0.f;
#pragma unroll
  for (int i = 0; i < (R1 > 0 ? R1 / 2 : 1); ++i) acc1[i] = 0.f;
  consume_wide<kS, R0, R1, kBig, kCluster, GateUpStage>(p, base, bars, strip, st, phase, acc0, acc1);
  store_h_wide<R0, R1>(p, it, staging, acc0, acc1);
}

template <bool kBig, int kCluster, bool kTail96>
__global__ void __launch_bounds__(kRsThreads, 1) moe_ws_wide_gate_up_kernel(const __grid_constant__ Params p) {
  constexpr int kS = kWideStages;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = dev::smem_addr(smem);
  const uint32_t staging = base + kS * GateUpStage::kBytes;
  const uint32_t bars = staging + 8 * kHChunk;
  if (threadIdx.x == 0) {
    for (int st = 0; st < kS; ++st) {
      dev::mbar_init(bars + 8 * st, 1);
      dev::mbar_init(bars + 8 * (kS + st), kCluster * kConsumerWarps);
    }
    dev::fence_mbar_init();
  }
  // kCluster > 1: every CTA's barriers exist before any copy into them or arrival.
  if constexpr (kCluster > 1) dev::cluster_sync();
  else __syncthreads();
  const int row_blocks = p.N / (kWideStrips * kStripRows);
  const int items = *p.s.num_tiles * row_blocks;
  if (run_producer<WideProducer<kS, kCluster, kTail96, GateUpStage>>(p, base, bars, items, row_blocks,
                                                                      ZeroOutForDown{p})) {
    // No CTA leaves while another may still copy into it or arrive on its barriers.
    if constexpr (kCluster > 1) dev::cluster_sync();
    return;
  }
  int st = 0;
  uint32_t phase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const Item it = item_at<wide_tile_pairs(kTail96)>(p.s, item, row_blocks);
    with_second_box<kTail96>(rows_second<kTail96>(p, it.count), [&](auto r1) {
      run_item<kTilePairs, r1.value, kBig, kCluster, kS>(p, it, base, bars, staging, st, phase);
    });
  }
  if constexpr (kCluster > 1) dev::cluster_sync();
}

// ---- down on wide items (MoeConfig::ws_down_items 2, 3) ----
// Item = 128 rows of w2 (8 strips) x one tile of the gate_up's wide tile map
// (up to 224 pairs, 256 without tail96), so down loads and dequantizes each
// weight tile once per call too (the 256-row items: twice for most experts at
// 8192 Kimi tokens, for a tile of 128 pairs and one of ~43), and needs no
// second tile map. The same K loop and copy cursor as gate_up's; the
// epilogue is the adders' (run_adders, fused_moe_ws.cuh): the MMA warps round
// an item's results to BF16 into the packed area and go on, three producer
// warps add weight * y into out during the next item. (Session 8's wide down
// with the MMA warps' FP32 atomics ran 7.23 ms against 5.30.)
template <int kPairs>
using WideDownArea = AdderArea<kWideStrips * kStripRows, kPairs>;
// Stage: B of the first 128 pair rows and a second box of up to 96 (tail96)
// or 128 rows, then the code and scale tiles; with the packed area, 5 stages
// of 33024 bytes or 4 of 37120 fit.
template <bool kTail96>
using DownStage = WideStage<kHalfB + (kTail96 ? 96 : 128) * 8 * 16>;
constexpr int down_stages(bool tail96) { return tail96 ? 5 : 4; }
template <bool kTail96>
constexpr int down_smem() {
  return down_stages(kTail96) * DownStage<kTail96>::kBytes + WideDownArea<wide_tile_pairs(kTail96)>::kBytes +
         2 * down_stages(kTail96) * 8;
}
static_assert(down_smem<true>() <= 227 * 1024 && down_smem<false>() <= 227 * 1024,
              "shared memory of one SM exceeded");
// The MMA warps' registers beside the adders (their loop needs ~40:
// run_adders): 232, but with the 256-pair tiles' (128, 128) item ptxas
// serialized the wgmmas at 232 (C7512), so 240 there, the adders' 24 spilling
// a few bytes as in fused_moe_ws.cu's deep down.
constexpr int down_mma_regs(bool tail96) { return tail96 ? 232 : 240; }

// The item's results into the packed area: acc0 = pairs 0..127 (words q
// 0..63), acc1 = pairs 128.. (q from 64); row = this warp's strip 4 wg + w.
template <class Area, int R0, int R1, int N0, int N1>
__device__ __forceinline__ void pack_wide(uint32_t packed, const float (&acc0)[N0], const float (&acc1)[N1]) {
  const int r = (threadIdx.x >> 5) * kStripRows + ((threadIdx.x & 31) >> 2);  // warp 4 wg + w
  pack_fragment<Area, R0 / 2>(packed, r, acc0);
  if constexpr (R1 > 0) pack_fragment<Area, R1 / 2>(packed + kTilePairs / 2 * Area::kRowWords * 4, r, acc1);
}

template <int R0, int R1, bool kBig, int kCluster, bool kTail96, int kS>
__device__ __forceinline__ void run_down_item(const Params& p, uint32_t base, uint32_t bars, uint32_t packed,
                                              int& st, uint32_t& phase, uint32_t& drained_phase) {
  using Area = WideDownArea<wide_tile_pairs(kTail96)>;
  const int strip = threadIdx.x >> 5;
  float acc0[R0 / 2], acc1[R1 > 0 ? R1 / 2 : 1];
#pragma unroll
  for (int i = 0; i < R0 / 2; ++i) acc0[i] = 0.f;
#pragma unroll
  for (int i = 0; i < (R1 > 0 ? R1 / 2 : 1); ++i) acc1[i] = 0.f;
  consume_wide<kS, R0, R1, kBig, kCluster, DownStage<kTail96>>(p, base, bars, strip, st, phase, acc0, acc1);
  const uint32_t adder_bars = packed + Area::kBarsOffset;  // staged, drained
  dev::mbar_wait_parity(adder_bars + 8, drained_phase ^ 1);  // the adders read the last item
  drained_phase ^= 1;
  pack_wide<Area, R0, R1>(packed, acc0, acc1);
  dev::mbar_arrive(adder_bars);
}

template <bool kBig, int kCluster, bool kTail96>
__global__ void __launch_bounds__(kRsThreads, 1) moe_ws_wide_down_kernel(const __grid_constant__ Params p) {
  constexpr int kS = down_stages(kTail96);
  using Stage = DownStage<kTail96>;
  using Area = WideDownArea<wide_tile_pairs(kTail96)>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = dev::smem_addr(smem);
  const uint32_t packed = base + kS * Stage::kBytes;
  const uint32_t adder_bars = packed + Area::kBarsOffset;
  const uint32_t bars = packed + Area::kBytes;
  if (threadIdx.x == 0) {
    for (int st = 0; st < kS; ++st) {
      dev::mbar_init(bars + 8 * st, 1);
      dev::mbar_init(bars + 8 * (kS + st), kCluster * kConsumerWarps);
    }
    dev::mbar_init(adder_bars, kThreads);
    dev::mbar_init(adder_bars + 8, kAdderThreads);
    dev::fence_mbar_init();
  }
  if constexpr (kCluster > 1) dev::cluster_sync();
  else __syncthreads();
  const int row_blocks = p.N / (kWideStrips * kStripRows);
  const int items = *p.s.num_tiles * row_blocks;
  if (run_producer<WideProducer<kS, kCluster, kTail96, Stage>, down_mma_regs(kTail96)>(
          p, base, bars, items, row_blocks, [&] { run_adders<Area>(p, packed, items, row_blocks); })) {
    if constexpr (kCluster > 1) dev::cluster_sync();
    return;
  }
  int st = 0;
  uint32_t phase = 0, drained_phase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const Item it = item_at<wide_tile_pairs(kTail96)>(p.s, item, row_blocks);
    with_second_box<kTail96>(rows_second<kTail96>(p, it.count), [&](auto r1) {
      run_down_item<kTilePairs, r1.value, kBig, kCluster, kTail96, kS>(p, base, bars, packed, st, phase,
                                                                       drained_phase);
    });
  }
  if constexpr (kCluster > 1) dev::cluster_sync();
}

// One launch of a wide kernel (gate_up's or down's) with kSmem bytes of
// dynamic shared memory, on clusters of kCluster CTAs.
template <auto kKernel, int kCluster, int kSmem>
void launch_wide_kernel(const Params& p, int ctas, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  });
  LaunchAttrs a;
  if constexpr (kCluster > 1) {
    ctas = cluster_grid<kKernel>(kCluster, kRsThreads, kSmem, ctas);
    a.cluster = dim3(kCluster);
  }
  launch_with(kKernel, dim3(unsigned(ctas)), kRsThreads, kSmem, stream, a, p);
}

template <bool kDown, bool kBig, int kCluster, bool kTail96>
void launch_wide_gemm(const Params& p, int ctas, cudaStream_t stream) {
  if constexpr (kDown)
    launch_wide_kernel<moe_ws_wide_down_kernel<kBig, kCluster, kTail96>, kCluster, down_smem<kTail96>()>(p, ctas,
                                                                                                          stream);
  else
    launch_wide_kernel<moe_ws_wide_gate_up_kernel<kBig, kCluster, kTail96>, kCluster, kWideSmem>(p, ctas, stream);
}

template <bool kDown, bool kBig>
void launch_wide_clusters(const Params& p, int cluster, int ctas, cudaStream_t stream) {
  if (cluster == 2 && p.tail96) launch_wide_gemm<kDown, kBig, 2, true>(p, ctas, stream);
  else if (cluster == 2) launch_wide_gemm<kDown, kBig, 2, false>(p, ctas, stream);
  else if (p.tail96) launch_wide_gemm<kDown, kBig, 1, true>(p, ctas, stream);
  else launch_wide_gemm<kDown, kBig, 1, false>(p, ctas, stream);
}

// gate_up's (kDown false) or down's wide kernel for the scale format, the
// cluster size and the tiles (Params::tail96).
template <bool kDown>
void launch_wide_any(const Params& p, bool big, int cluster, int ctas, cudaStream_t stream) {
  MX_CHECK(cluster == 1 || cluster == 2, "fused_moe_decode: B clusters of 1 or 2 CTAs");
  // A cluster's CTAs take adjacent row blocks of one tile: row blocks even
  // (check_moe_prefill_ws_shape: 2I and H multiples of 256).
  MX_CHECK(cluster == 1 || (p.N / (kWideStrips * kStripRows)) % 2 == 0, "fused_moe_decode: odd row blocks");
  if (big) launch_wide_clusters<kDown, true>(p, cluster, ctas, stream);
  else launch_wide_clusters<kDown, false>(p, cluster, ctas, stream);
}

}  // namespace

void launch_gate_up_wide(const Params& p, bool big, int cluster, int ctas, cudaStream_t stream) {
  launch_wide_any<false>(p, big, cluster, ctas, stream);
}

void launch_down_wide(const Params& p, bool big, int cluster, int ctas, cudaStream_t stream) {
  launch_wide_any<true>(p, big, cluster, ctas, stream);
}

}  // namespace mx::cuda::ws
