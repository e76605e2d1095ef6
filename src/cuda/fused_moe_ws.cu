// Prefill path of the fused MoE on Hopper, warp-specialized and persistent
// (wgmma, sm_90a). Work item = 256 weight rows x one tile of up to 128 pairs
// of one expert; a CTA (one per SM, persistent) loops over the items.
//   * Pair-sorted activations. gather_pairs_kernel writes x once per call in
//     the pair order of the tile map (row i = x[sorted_pairs[i] / topk]) and
//     in wgmma's no-swizzle K-major layout: [K tile][8-wide K chunk][row][8],
//     K permuted inside each 64-tile as the weight layout wants
//     (mma_logical_col). A tile's B for one K tile is then one 2-D box (8
//     chunks x up to 128 rows of 16 bytes). gate_up writes h in the same
//     layout, so down's B is one box too.
//   * Copies: a producer warpgroup (run_producer, fused_moe_ws.cuh; its
//     registers go to the MMA warps by setmaxnreg) whose thread 0 runs a
//     cursor over the CTA's (item, K tile) sequence, refilling each stage as
//     soon as every MMA warp gave it back. A stage of the
//     mbarrier ring = three bulk tensor copies (TMA): B, the 16 strips' code
//     tiles (16 x 512 bytes) and their scale tiles (16 x 32 bytes),
//     completing on the stage's `full` barrier. The cursor runs across
//     items, so one item's epilogue overlaps the next one's loads.
//   * MMAs: 2 warpgroups, each 128 rows = 2 x m64. Each warp dequantizes
//     its 2 strips' A fragments in registers (the mma.m16n8k16 A layout is
//     wgmma's RS A layout per warp) and issues wgmma m64n{48,64,128}k16 from
//     registers x shared-memory B (48: partial tiles of <= 48 pairs,
//     box_rows). A stage is given back (`empty` barrier, one arrival per
//     warp) when the MMAs that read it have retired. No CTA-wide barrier in
//     the K loop.
//   * Epilogues: gate_up writes h = SiLU(gate) * up through a per-warpgroup
//     staging area (16 KB) so that the global stores are whole 16-byte rows
//     of the chunk layout. down (auto since 2026-12-02, session 13): the MMA
//     warps round an item's results to BF16 into shared memory and go on;
//     three producer-warpgroup warps add weight * y into out with 16-byte
//     vector reductions during the next item (run_adders, fused_moe_ws.cuh;
//     6-stage ring). Selectable: FP32 atomics right after the item (kStages
//     ring) or deferred: the item's results go to shared memory and each warp
//     adds them a step per K tile of its next item, between its wgmma groups
//     (DeferredAdd; 4- or 5-stage ring). gate_up keeps two wgmma groups in
//     flight (consume_item_deep).
// Where gate_up runs the wide items (fused_moe_ws_wide.cu), down runs on the
// same items there (MoeConfig::ws_down_items; session 18).
// The pieces shared with fused_moe_ws_ss.cu (a dequant warpgroup feeding SS
// wgmma, MoeConfig::ws_dequant 2-3) are in fused_moe_ws.cuh.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/host/moe_prefill_items.h"
#include "cuda/per_device_once.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/moe_tiles.cuh"
#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_qdq.cuh"
#include "cuda/wgmma_rs_narrow.cuh"
#include "cuda/fused_moe_ws.cuh"

namespace mx::cuda {

namespace {

using namespace ws;

// Ring depth; the producer warpgroup refills each stage as soon as all MMA
// warps gave it back, so copies run up to kStages - 1 tiles ahead.
constexpr int kStages = 7;
// down's deferred epilogue (kDefer): a thread's 128 results of one item are
// 32 steps of 4 floats. kDefer 1: all 32 staged, stored [step][thread] (16
// bytes each, conflict-free), 128 KB, leaving room for a 4-stage ring;
// kDefer 2: 24 staged (96 KB, 5 stages), the last 8 added right away.
// kDefer 3: the adders of the producer warpgroup (run_adders) take the item's
// results as BF16 (66 KB), 6 stages.
constexpr int kAdders = 3;
// The MMA warps' registers with the adders: 232 leaves the adders 40 (no
// spills), but makes ptxas serialize the deep K loop's wgmmas (C7512); there
// 240, and the adders' 24 spill 4-8 bytes (in their item loop).
constexpr int adder_mma_regs(bool deep) { return deep ? 240 : 232; }
constexpr int staged_steps(int defer) { return defer == 2 ? 24 : defer == 1 ? kAllSteps : 0; }
constexpr int stages_of(int defer) { return defer == kAdders ? 6 : defer == 2 ? 5 : defer == 1 ? 4 : kStages; }
constexpr int smem_bytes(bool gate_up, int defer) {
  return stages_of(defer) * kStageBytes + (gate_up ? 2 * kStagingBytes : 0) +
         staged_steps(defer) * kThreads * 16 + (defer == kAdders ? DownArea::kBytes : 0) +
         2 * stages_of(defer) * 8;
}
static_assert(smem_bytes(true, 0) <= 227 * 1024, "shared memory of one SM exceeded");
static_assert(smem_bytes(false, 1) <= 227 * 1024, "shared memory of one SM exceeded");
static_assert(smem_bytes(false, 2) <= 227 * 1024, "shared memory of one SM exceeded");
static_assert(smem_bytes(false, kAdders) <= 227 * 1024, "shared memory of one SM exceeded");

// xs[(j * 8 + c) * R + i] (16 bytes) = logical K chunk c of K tile j of
// x[sorted_pairs[i] / topk]. A CTA is 256 consecutive rows of one K tile, a
// warp 32 of them: each load instruction reads 4 whole rows' 128 bytes (8
// lanes per row, 16 bytes each) into a warp's padded shared area (33 words
// per row: both passes conflict-free), then lane l takes row l's words in the
// MMA order (mma_word_at) and stores its 8 chunks; each warp store is 512
// contiguous bytes. Why: with a row per thread (until session 18) every load
// instruction touched 32 lines of x for 16 bytes each, 8 times per row.
constexpr int kGatherRows = 256;
constexpr int kGatherRowWords = kTileK / 2 + 1;  // 32 words + 1 of padding
static_assert(kGatherRows % 32 == 0, "a warp gathers 32 rows");
// The row word that lands at MMA position m (mma_word_of inverted).
constexpr __host__ __device__ int mma_word_at(int m) { return 8 * (m & 3) + 2 * (m >> 3) + ((m >> 2) & 1); }
constexpr bool mma_word_at_inverts_mma_word_of() {
  for (int r = 0; r < kTileK / 2; ++r)
    if (mma_word_at(mma_word_of(r)) != r) return false;
  return true;
}
static_assert(mma_word_at_inverts_mma_word_of(), "mma_word_at must invert mma_word_of");
__global__ void __launch_bounds__(kGatherRows) gather_pairs_kernel(const uint16_t* __restrict__ x,
                                                                  uint4* __restrict__ xs, MoeScratch s,
                                                                  int E, int H, int topk, int R) {
  __shared__ uint32_t rows_area[kGatherRows * kGatherRowWords];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = blockIdx.x * kGatherRows + warp * 32;
  const int j = blockIdx.y;  // j < H / 64: the grid
  const int pairs = s.offsets[E];
  if (row0 >= pairs) return;
  const int token = row0 + lane < pairs ? s.sorted_pairs[row0 + lane] / topk : 0;
  uint32_t* area = rows_area + warp * 32 * kGatherRowWords;
  const int q = lane & 7;  // this lane's 16 bytes of a row
#pragma unroll
  for (int it = 0; it < 8; ++it) {
    const int r = 4 * it + (lane >> 3);
    const int row_token = __shfl_sync(0xffffffffu, token, r);
    if (row0 + r < pairs) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(x + size_t(row_token) * H + j * kTileK) + q);
      uint32_t* w = area + r * kGatherRowWords + 4 * q;
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    }
  }
  __syncwarp();
  if (row0 + lane >= pairs) return;
  const uint32_t* row = area + lane * kGatherRowWords;
#pragma unroll
  for (int c = 0; c < 8; ++c)
    xs[(size_t(j) * 8 + c) * R + row0 + lane] = make_uint4(row[mma_word_at(4 * c)], row[mma_word_at(4 * c + 1)],
                                                           row[mma_word_at(4 * c + 2)], row[mma_word_at(4 * c + 3)]);
}

// W4A4: h quantize-dequantized per 32 along I in natural column order while
// it sits in the chunk layout gate_up wrote. Thread = (row i, K tile j): the
// tile's 64 values of row i are its 8 chunks; undoing gather_pairs_kernel's
// word permutation gives natural words 0-15 (block 0) and 16-31 (block 1),
// each quantized as mxfp4_qdq_activations does, then stored back in place.
__global__ void __launch_bounds__(256) qdq_chunks_kernel(uint4* __restrict__ h, MoeScratch s, int E, int I, int R) {
  const int i = blockIdx.x * 32 + (threadIdx.x & 31);
  const int j = blockIdx.y * 8 + (threadIdx.x >> 5);
  if (i >= s.offsets[E] || j >= I / kTileK) return;
  uint32_t logical[32];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint4 v = h[(size_t(j) * 8 + c) * R + i];
    logical[4 * c] = v.x, logical[4 * c + 1] = v.y, logical[4 * c + 2] = v.z, logical[4 * c + 3] = v.w;
  }
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    uint32_t amax = 0;
#pragma unroll
    for (int r = 16 * b; r < 16 * b + 16; ++r) {
      const uint32_t w = logical[mma_word_of(r)];
      amax = max(amax, max(w & 0x7FFFu, (w >> 16) & 0x7FFFu));
    }
    const int e_s = dev::qdq_scale_exponent(amax);
    const float inv = dev::exp2_int(-e_s), scale = dev::exp2_int(e_s);
#pragma unroll
    for (int r = 16 * b; r < 16 * b + 16; ++r) {
      uint32_t& w = logical[mma_word_of(r)];
      w = uint32_t(dev::qdq_bf16(uint16_t(w), inv, scale)) | (uint32_t(dev::qdq_bf16(uint16_t(w >> 16), inv, scale)) << 16);
    }
  }
#pragma unroll
  for (int c = 0; c < 8; ++c)
    h[(size_t(j) * 8 + c) * R + i] =
        make_uint4(logical[4 * c], logical[4 * c + 1], logical[4 * c + 2], logical[4 * c + 3]);
}

// Keeps A fragments live up to here (a read, no new definition: a definition
// while another buffer's group is in flight made ptxas serialize the wgmmas
// of the 3-buffer loop, C7513).
__device__ __forceinline__ void use_registers(const uint32_t (&a)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" ::"r"(a[kk][r]) : "memory");
}

// K loop of one item for one consumer warp: acc[m] (first kCols / 2 floats)
// += strip (wg * 8 + m * 4 + warp) x B's box of kCols pair rows (box_rows).
// Per K tile two wgmma groups (m = 0, 1), each dequantized while the previous group runs
// (wait_group 1), so the A fragments take 2 x 16 registers. (A whole tile
// double-buffered, 64 registers, left 255 registers with spills in the loop:
// 89 M local-memory requests per gate_up call, 21.5 ms.) `pending` adds
// one step of the previous item's deferred results per K tile while the
// tile's second group runs (NoPending: nothing). Tiles from j_begin (the
// tail of consume_item_deep; every earlier tile's stage already given back).
template <int kS, int kCols, bool kBig, class Pending>
__device__ __forceinline__ void consume_item(const Params& p, uint32_t base, uint32_t bars, int wg,
                                             int& st, uint32_t& phase, Pending& pending,
                                             float (&acc)[2][64], int j_begin = 0) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int KT = p.K / kTileK;
  uint32_t a[2][4][4];
  int prev = -1;
  for (int j = j_begin; j < KT; ++j) {
    dev::mbar_wait_parity(bars + 8 * st, phase);
    const uint32_t sb = base + st * kStageBytes;
    uint4 wv[2];
    uint32_t sc[2];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const int strip = wg * 8 + m * 4 + w;
      wv[m] = dev::lds128(sb + kActStage + strip * kTileCodeBytes + lane * 16);
      sc[m] = dev::lds_u16(sb + kActStage + kCodeStage + strip * kTileScaleBytes + (t >> 1) * 16 + 2 * g);
    }
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      // a[m] was last read by group (tile j - 1, m), retired by the last wait.
      const dev::ScaleMul mul = dev::scale_multipliers<kBig>(sc[m]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(wv[m], kk), mul, a[m][kk]);
      dev::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        dev::wgmma_rs_bf16_cols<kCols>(acc[m], a[m][kk], b_desc_rows<kCols>(sb + kk * kCols * 32));
      dev::wgmma_commit();
      if (m == 1) pending.step(p, j);  // its REDs issue while both groups run
      dev::wgmma_wait<1>();
      keep_registers(a[m ^ 1]);  // read by the group that just retired
      if (m == 0) {
        // Group (j - 1, 1) retired too: tile j - 1's stage is free.
        if (prev >= 0 && lane == 0) dev::mbar_arrive(bars + 8 * (kS + prev));
        __syncwarp();  // the warp reconverges before the next aligned wgmma
      }
    }
    prev = st;
    if (++st == kS) st = 0, phase ^= 1;
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc[0]);
  dev::fence_accumulators(acc[1]);
  keep_registers(a[1]);
  if (prev >= 0 && lane == 0) dev::mbar_arrive(bars + 8 * (kS + prev));
}

// The same K loop with three A buffers and `wait_group 2`: a warpgroup keeps
// two groups queued on the tensor pipe while it dequantizes the third
// (gate_up: 16 registers more; it fits the 240 setmaxnreg gives the MMA
// warps without spills, 247 when they had 255). Group q = 2 j + m uses buffer
// q % 3; the loop runs 3 K tiles per turn so that every index is a constant.
// Tile j - 1's stage is free once group (j - 1, 1) = q - 2 retired, i.e.
// after the wait that follows group (j, 1). The last KT % 3 tiles run in
// consume_item after a wait_group 0: an early exit from the 3-tile turn made
// ptxas serialize every wgmma (C7513).
template <int kS, int kCols, bool kBig, class Pending>
__device__ __forceinline__ void consume_item_deep(const Params& p, uint32_t base, uint32_t bars, int wg,
                                                  int& st, uint32_t& phase, Pending& pending,
                                                  float (&acc)[2][64]) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int KT = p.K / kTileK;
  const int KT3 = KT - KT % 3;
  uint32_t a[3][4][4];
  int prev = -1;
  for (int j0 = 0; j0 < KT3; j0 += 3) {
#pragma unroll
    for (int u = 0; u < 3; ++u) {
      const int j = j0 + u;
      dev::mbar_wait_parity(bars + 8 * st, phase);
      const uint32_t sb = base + st * kStageBytes;
      uint4 wv[2];
      uint32_t sc[2];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int strip = wg * 8 + m * 4 + w;
        wv[m] = dev::lds128(sb + kActStage + strip * kTileCodeBytes + lane * 16);
        sc[m] = dev::lds_u16(sb + kActStage + kCodeStage + strip * kTileScaleBytes + (t >> 1) * 16 + 2 * g);
      }
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        uint32_t(&ab)[4][4] = a[(2 * u + m) % 3];  // last read by group q - 3, retired
        const dev::ScaleMul mul = dev::scale_multipliers<kBig>(sc[m]);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(wv[m], kk), mul, ab[kk]);
        dev::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          dev::wgmma_rs_bf16_cols<kCols>(acc[m], ab[kk], b_desc_rows<kCols>(sb + kk * kCols * 32));
        dev::wgmma_commit();
        if (m == 1) pending.step(p, j);
        dev::wgmma_wait<2>();
        use_registers(a[(2 * u + m + 1) % 3]);  // group q - 2's buffer: retired just now
        if (m == 1) {
          if (prev >= 0 && lane == 0) dev::mbar_arrive(bars + 8 * (kS + prev));
          __syncwarp();  // the warp reconverges before the next aligned wgmma
        }
      }
      prev = st;
      if (++st == kS) st = 0, phase ^= 1;
    }
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc[0]);
  dev::fence_accumulators(acc[1]);
#pragma unroll
  for (int b = 0; b < 3; ++b) use_registers(a[b]);
  if (prev >= 0 && lane == 0) dev::mbar_arrive(bars + 8 * (kS + prev));
  consume_item<kS, kCols, kBig>(p, base, bars, wg, st, phase, pending, acc, KT3);
}

// kDeep: the K loop of consume_item_deep (3 A buffers, wait_group 2).
// kDefer: down's epilogue (staged_steps, stages_of): 0 = atomics after each
// item, 1, 2 = DeferredAdd, kAdders = run_adders.
template <bool kGateUp, bool kBig, int kDefer, bool kDeep = false>
__global__ void __launch_bounds__(kRsThreads, 1) moe_ws_kernel(const __grid_constant__ Params p) {
  constexpr int kS = stages_of(kDefer);
  constexpr int kStaged = staged_steps(kDefer);
  constexpr bool kUseAdders = kDefer == kAdders;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = dev::smem_addr(smem);
  const uint32_t staging = base + kS * kStageBytes;  // down with adders: the packed area
  const uint32_t adder_bars = staging + DownArea::kBarsOffset;  // staged, drained (adders only)
  const uint32_t bars = staging + (kGateUp ? 2 * kStagingBytes : 0) + kStaged * kThreads * 16 +
                        (kUseAdders ? DownArea::kBytes : 0);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kS; ++st) {
      dev::mbar_init(bars + 8 * st, 1);
      dev::mbar_init(bars + 8 * (kS + st), kConsumerWarps);
    }
    if constexpr (kUseAdders) {
      dev::mbar_init(adder_bars, kThreads);
      dev::mbar_init(adder_bars + 8, kAdderThreads);
    }
    dev::fence_mbar_init();
  }
  __syncthreads();
  const int row_blocks = p.N / kItemRows;
  const int items = *p.s.num_tiles * row_blocks;
  const int c = threadIdx.x >> 7;
  if constexpr (kUseAdders) {
    if (run_producer<Producer<kS>, adder_mma_regs(kDeep)>(p, base, bars, items, row_blocks, [&] {
          run_adders<DownArea>(p, staging, items, row_blocks);
        }))
      return;
  } else if constexpr (kGateUp) {
    if (run_producer<Producer<kS>>(p, base, bars, items, row_blocks, ZeroOutForDown{p})) return;
  } else if (run_producer<Producer<kS>>(p, base, bars, items, row_blocks)) {
    return;
  }
  std::conditional_t<kDefer != 0 && !kUseAdders, DeferredAdd<kStaged>, NoPending> pending;
  if constexpr (kDefer != 0 && !kUseAdders) pending.slots = staging + threadIdx.x * 16;
  uint32_t drained_phase = 0;  // adders: parity of the drained phase the next item waits for, ^ 1
  int st = 0;
  uint32_t phase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const Item it = item_at(p.s, item, row_blocks);
    float acc[2][64];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[m][i] = 0.f;
    const int rows = box_rows(it.count, p.fine_boxes);
    with_box_rows<!kDeep>(rows, [&](auto cols) {
      if constexpr (kDeep) consume_item_deep<kS, cols.value, kBig>(p, base, bars, c, st, phase, pending, acc);
      else consume_item<kS, cols.value, kBig>(p, base, bars, c, st, phase, pending, acc);
    });
    if constexpr (kGateUp) {
      store_h(p, it, c, staging + c * kStagingBytes, acc);
    } else if constexpr (kUseAdders) {
      dev::mbar_wait_parity(adder_bars + 8, drained_phase ^ 1);  // the adders read the last item
      drained_phase ^= 1;
      with_box_rows<!kDeep>(rows, [&](auto cols) { pack_results<cols.value>(staging, c, acc); });
      dev::mbar_arrive(adder_bars);
    } else if constexpr (kDefer != 0) {
      pending.finish(p, p.K / kTileK);  // steps the K loop had no tile for
      pending.stage(p, it, c, acc);
    } else {
      add_out(p, it, c, acc);
    }
  }
  if constexpr (kDefer != 0 && !kUseAdders) pending.finish(p, 0);
}

// Maps of one GEMM: weights [experts * N / 16 strips][K / 64 tiles] in boxes
// of an item's strips (kItemStrips; the wide gate_up's kWideStrips) and B
// [K / 64 * 8 chunks][R rows x 16 bytes], B's boxes 8 / b_cluster chunks deep
// (copy_b: each CTA of a cluster copies its part).
void set_maps(Params& p, const uint8_t* codes, const uint8_t* scales, int experts, const void* act,
              int box_strips = kItemStrips, int b_cluster = 1) {
  const int KT = p.K / kTileK;
  const uint64_t strips = uint64_t(experts) * (p.N / kStripRows);
  constexpr const char* who = "fused_moe_decode";
  p.codes = tensor_map_2d(who, codes, uint64_t(KT) * kTileCodeBytes, strips, kTileCodeBytes / 8, box_strips);
  p.scales = tensor_map_2d(who, scales, uint64_t(KT) * kTileScaleBytes, strips, kTileScaleBytes / 8, box_strips);
  // B boxes of `rows` pair rows (16 bytes = two 8-byte elements each).
  const auto act_rows = [&](int rows) {
    return tensor_map_2d(who, act, uint64_t(p.R) * 16, uint64_t(KT) * 8, 2 * rows, 8 / b_cluster);
  };
  p.act128 = act_rows(128);
  p.act64 = act_rows(64);
  p.act48 = act_rows(48);
  p.act32 = act_rows(32);
  p.act96 = act_rows(96);
}

template <bool kGateUp, bool kBig, int kDefer = 0, bool kDeep = false>
void launch_ws(const Params& p, int ctas, cudaStream_t stream) {
  // The kernels with two wgmma groups in flight compile 64- and 128-row B
  // boxes only (WsChoices keeps fine_boxes from them; CPU tests check it).
  MX_CHECK(!kDeep || !p.fine_boxes, "fused_moe_decode: 48-row B boxes asked of a kernel without them");
  constexpr int kSmem = smem_bytes(kGateUp, kDefer);
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_ws_kernel<kGateUp, kBig, kDefer, kDeep>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  });
  moe_ws_kernel<kGateUp, kBig, kDefer, kDeep><<<unsigned(ctas), kRsThreads, kSmem, stream>>>(p);
  MX_CUDA_CHECK(cudaGetLastError());
}

template <bool kBig>
void launch_gate_up(const Params& p, bool deep, int ctas, cudaStream_t stream) {
  if (deep) launch_ws<true, kBig, 0, true>(p, ctas, stream);
  else launch_ws<true, kBig, 0, false>(p, ctas, stream);
}

// epilogue: MoeConfig::ws_down_epilogue (1..5).
template <bool kBig>
void launch_down(const Params& p, int epilogue, int ctas, cudaStream_t stream) {
  if (epilogue == 5) launch_ws<false, kBig, kAdders, false>(p, ctas, stream);
  else if (epilogue == 4) launch_ws<false, kBig, kAdders, true>(p, ctas, stream);
  else if (epilogue == 3) launch_ws<false, kBig, 2>(p, ctas, stream);
  else if (epilogue == 2) launch_ws<false, kBig, 1>(p, ctas, stream);
  else launch_ws<false, kBig, 0>(p, ctas, stream);
}

// MoeConfig::phase_events (the bench's per-phase timing): event i after launch i.
void record_phase(const MoeConfig& config, int i, cudaStream_t stream) {
  if (config.phase_events) MX_CUDA_CHECK(cudaEventRecord(config.phase_events[i], stream));
}

}  // namespace

void check_moe_prefill_ws_shape(const MoeWeights& w) {
  if ((2 * w.intermediate) % kItemRows || w.hidden % kItemRows)
    fail_input("fused_moe_decode: the warp-specialized path needs 2I and H multiples of {}", kItemRows);
  if (w.experts > dev::kMoeMapThreads)
    fail_input("fused_moe_decode: the warp-specialized path takes up to {} experts", dev::kMoeMapThreads);
}

namespace {

// Path 5's settings of one call (cuda/host/moe_prefill_items.h); fused_moe_decode
// checked the config's ranges (check_decode_config in fused_moe.cu,
// check_moe_prefill_ws) before anything launched. out_elems = T x H.
WsChoices resolve_ws_choices(const MoeConfig& config, int pairs, int experts, int64_t out_elems) {
  const WsRequest asked{config.ws_dequant,  config.ws_gate_up_items,   config.ws_down_epilogue, config.ws_gate_up_depth,
                        config.ws_box_rows, config.ws_gate_up_cluster, config.ws_down_items};
  return resolve_ws_choices(asked, pairs, experts, out_elems);
}

// The tile map in tiles of up to 256 pairs per expert (wide items; 224 with
// tail96) or 128.
void launch_tile_map(const MoeScratch& s, int E, bool wide, bool tail96, cudaStream_t stream) {
  if (wide && tail96) dev::moe_tile_map_kernel<kWideTail96Pairs><<<1, dev::kMoeMapThreads, 0, stream>>>(s, E);
  else if (wide) dev::moe_tile_map_kernel<2 * kTilePairs><<<1, dev::kMoeMapThreads, 0, stream>>>(s, E);
  else dev::moe_tile_map_kernel<kTilePairs><<<1, dev::kMoeMapThreads, 0, stream>>>(s, E);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool moe_prefill_ws_rounds_y(const MoeConfig& config, int T, int H) {
  return resolve_ws_choices(config, 0, 1, int64_t(T) * H).rounds_y();
}

void check_moe_prefill_ws(const MoeWeights& w, int T, int pairs, const MoeConfig& config) {
  check_moe_prefill_ws_shape(w);
  if ((config.ws_down_items == 2 || config.ws_down_items == 3) &&
      !resolve_ws_choices(config, pairs, w.experts, int64_t(T) * w.hidden).wide_down)
    fail_input("fused_moe_decode: ws_down_items {} (down on the wide items) needs the wide gate_up items, "
               "ws_dequant 1 and the adders' epilogue with one wgmma group (ws_down_epilogue 5), "
               "which {} tokens with these settings do not give",
               config.ws_down_items, T);
  if (moe_prefill_ws_rounds_y(config, T, w.hidden) && !adders_take(int64_t(T) * w.hidden))
    fail_input("fused_moe_decode: down's adder epilogue (ws_down_epilogue {}) takes T x H < 2^32, got {} x {}",
               config.ws_down_epilogue, T, w.hidden);
}

void launch_moe_prefill_ws(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                           const float* topk_weights, float* out, const MoeScratch& s,
                           cudaStream_t stream, const MoeConfig& config) {
  const int E = w.experts, H = w.hidden, I = w.intermediate;  // checked: check_moe_prefill_ws
  const int R = T * topk;
  const WsChoices c = resolve_ws_choices(config, R, E, int64_t(T) * H);
  // Persistent: one CTA per SM, each walking items blockIdx.x, + gridDim.x, ...
  const int ctas = config.ws_ctas > 0 ? config.ws_ctas : sm_count();
  uint4* xs = reinterpret_cast<uint4*>(xp);
  // Both GEMMs' tensor maps first: an encoding failure launches nothing, so
  // out and the workspace are left as they were.
  Params gu{};
  gu.N = 2 * I;
  gu.K = H;
  gu.R = R;
  gu.topk = topk;
  gu.s = s;
  gu.h = reinterpret_cast<uint4*>(s.h);
  gu.out = out;
  gu.out_vec4 = int64_t(T) * H / 4;
  gu.weights = topk_weights;
  set_maps(gu, w.w13_codes, w.w13_scales, E, xs, c.wide_gate_up ? kWideStrips : kItemStrips, c.gate_up_cluster);
  Params dn = gu;
  dn.N = H;
  dn.K = I;
  set_maps(dn, w.w2_codes, w.w2_scales, E, s.h, c.wide_down ? kWideStrips : kItemStrips, c.down_cluster);
  gu.fine_boxes = c.fine_gate_up;
  dn.fine_boxes = c.down_boxes_fine();
  gu.tail96 = c.tail96;
  dn.tail96 = c.wide_down && c.tail96;
  launch_tile_map(s, E, c.wide_gate_up, c.tail96, stream);
  record_phase(config, 2, stream);
  gather_pairs_kernel<<<dim3(unsigned((R + kGatherRows - 1) / kGatherRows), unsigned(H / kTileK)), kGatherRows, 0,
                        stream>>>(x, xs, s, E, H, topk, R);
  MX_CUDA_CHECK(cudaGetLastError());
  record_phase(config, 3, stream);
  if (c.wide_gate_up) launch_gate_up_wide(gu, w.big_scales, c.gate_up_cluster, ctas, stream);  // tail96 in gu
  else if (c.dequant >= 2) launch_gate_up_ss(gu, w.big_scales, ctas, stream);
  else if (w.big_scales) launch_gate_up<true>(gu, c.deep, ctas, stream);
  else launch_gate_up<false>(gu, c.deep, ctas, stream);
  if (c.wide_gate_up && !c.wide_down) launch_tile_map(s, E, false, false, stream);  // down's 128-pair items
  if (w.w4a4) {  // down's input quantized per 32 in natural order (x was before the gather)
    qdq_chunks_kernel<<<dim3(unsigned((R + 31) / 32), unsigned((I / kTileK + 7) / 8)), 256, 0, stream>>>(
        reinterpret_cast<uint4*>(s.h), s, E, I, R);
    MX_CUDA_CHECK(cudaGetLastError());
  }
  record_phase(config, 4, stream);
  if (c.wide_down) launch_down_wide(dn, w.big_scales, c.down_cluster, ctas, stream);  // tail96 in dn
  else if (c.dequant == 3) launch_down_ss(dn, w.big_scales, c.epilogue, ctas, stream);
  else if (w.big_scales) launch_down<true>(dn, c.epilogue, ctas, stream);
  else launch_down<false>(dn, c.epilogue, ctas, stream);
  record_phase(config, 5, stream);
}

}  // namespace mx::cuda
