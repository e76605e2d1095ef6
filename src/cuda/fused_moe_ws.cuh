// Pieces shared by the warp-specialized MoE prefill kernels (path 5):
// fused_moe_ws.cu (the MMA warps dequantize their own A fragments, RS wgmma)
// and fused_moe_ws_ss.cu (a dequant warpgroup writes A to shared memory for
// SS wgmma). Work item = 256 weight rows x one tile of up to 128 pairs of one
// expert; the copy ring of TMA stages (B, code and scale tiles), the
// epilogues (h in the chunk layout; out += weight * y) and the per-call
// parameters are the same in both; fused_moe_ws_wide.cu (gate_up and down on
// 128-row items of up to 224 or 256 pairs) uses them too. Included by those
// three .cu files only.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/mxfp4_device.cuh"
#include "cuda/tma_copy.cuh"
#include "cuda/wgmma_rs.cuh"
#include "cuda/mxfp4_internal.h"

namespace mx::cuda::ws {

constexpr int kTilePairs = 128;                      // B columns per item
constexpr int kWideTail96Pairs = kTilePairs + 96;    // wide tiles with Params::tail96
constexpr int kItemStrips = 16;                      // weight strips per item
constexpr int kItemRows = kItemStrips * kStripRows;  // 256
constexpr int kWideStrips = 8;                       // the wide gate_up's items: 128 rows
// Two MMA warpgroups (threads 0..255). The RS kernels add a producer
// warpgroup after them (its thread 0 runs the copy cursor), the SS kernel a
// dequant warpgroup.
constexpr int kConsumerWarps = 8;
constexpr int kThreads = kConsumerWarps * 32;
// RS kernels: 384 threads launched with 168 registers each; setmaxnreg gives
// the MMA warpgroups 240 (128 accumulators + the A buffers: at 168 ptxas
// serialized every wgmma, C7512) and leaves the producer warpgroup 24 (down
// with the adders, one wgmma group in flight: 232 and 40, but 240 and 24 in
// the wide down on 256-pair tiles, down_mma_regs; run_producer's kMma).
// Until 2026-12-02 thread 0 of the MMA warps issued the copies between its
// own MMAs: its wait for the slowest warp's release held its warpgroup's
// next wgmma (a third of the warps' samples sat on the stage barriers; the
// producer warpgroup made the wide gate_up 15% faster, session 12).
constexpr int kProducerThreads = 128;
constexpr int kRsThreads = kThreads + kProducerThreads;
constexpr int kProducerRegs = 24, kMmaRegs = 240;
// down's adders (ws_down_epilogue 4, 5: run_adders) are the producer
// warpgroup's warps 1..3 (with 256-row items the third only fills the pair
// table: 64 adders cover the 64 row groups); its warp 0 runs the copy cursor.
constexpr int kAdderWarps = 3;
constexpr int kAdderThreads = kAdderWarps * 32;
constexpr int kFirstAdder = kThreads + 32;  // the producer warpgroup's warp 0 runs the copy cursor
// Registers per thread of a CTA of `threads` launched with
// __launch_bounds__(threads, 1): the 64K file shared out, rounded down to the
// allocation granule of 8 (384 threads: 168). setmaxnreg can only move
// registers within threads x this.
constexpr int launch_regs(int threads) { return 65536 / threads / 8 * 8; }
static_assert(kThreads * kMmaRegs + kProducerThreads * kProducerRegs <= kRsThreads * launch_regs(kRsThreads),
              "setmaxnreg moves only the registers the CTA was launched with");
constexpr int kChunkBytes = kTilePairs * 16;           // 8 K values of every row: 2048
constexpr int kActStage = 8 * kChunkBytes;             // B of one 64-wide K tile: 16384
constexpr int kCodeStage = kItemStrips * kTileCodeBytes;    // 8192
constexpr int kScaleStage = kItemStrips * kTileScaleBytes;  // 512
constexpr int kStageBytes = kActStage + kCodeStage + kScaleStage;  // 25088
constexpr int kStagingBytes = 8 * kChunkBytes;  // gate_up epilogue, per consumer warpgroup
// down's deferred epilogue: a thread's 128 results of one item are 32 steps
// of 4 floats, stored [step][thread] (16 bytes each, conflict-free).
constexpr int kAllSteps = 32;

__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void sts16(uint32_t a, uint16_t v) {
  asm volatile("st.shared.u16 [%0], %1;" ::"r"(a), "h"(v) : "memory");
}

// K-major, no swizzle: core matrices 8 rows x 16 bytes; leading (K) byte
// offset = the chunk stride of a box of kRows pair rows (kRows x 16 bytes:
// a box packs its 8 chunks one after another), stride (N) byte offset 128 (8
// rows).
template <int kRows>
__device__ __forceinline__ uint64_t b_desc_rows(uint32_t addr) {
  return dev::kmajor_b_desc(addr, kRows * 16);
}

// Tensor maps (cuTensorMapEncodeTiled, 8-byte elements so that one box row
// can be 2 KB): a stage is three bulk tensor copies issued by one thread.
struct Params {
  CUtensorMap codes;   // [strips of all experts][K / 64 x 512 bytes], box 16 strips x 512 B
  CUtensorMap scales;  // [strips][K / 64 x 32 bytes], box 16 x 32 B
  CUtensorMap act128;  // B: [K / 64 x 8 chunks][R x 16 bytes], box 8 x 128 rows
  CUtensorMap act64;   // the same, box 8 x 64 rows (items of <= 64 pairs)
  CUtensorMap act48;   // box 8 x 48 rows (fine_boxes: items of <= 48 pairs)
  CUtensorMap act32;   // box 8 x 32 rows, and
  CUtensorMap act96;   // 8 x 96 rows: the wide items' second box with tail96
                       // (the wide items on 2-CTA clusters: boxes of 4 chunks, set_maps)
  int N, K, R, topk;
  // B box (and wgmma width) of an item's partial tile of <= 48 pairs (in the
  // wide gate_up: of the pairs past the first 128): false = 64 rows, true = 48
  // (box_rows; MoeConfig::ws_box_rows). Never true for the kernels with two
  // wgmma groups in flight or the SS kernels: a 48-row K loop made ptxas
  // serialize the deep kernels' wgmmas (C7512), and the SS MMA loop has none.
  bool fine_boxes;
  // The wide gate_up on tiles of up to 224 pairs whose pairs past the first
  // 128 take a box of 32, 48, 64 or 96 rows (MoeConfig::ws_box_rows 3; the
  // box of 32 also for tiles of <= 128 pairs), instead of tiles of 256 and
  // boxes of 48, 64 or 128 (fused_moe_ws_wide.cu, rows_second).
  bool tail96;
  MoeScratch s;
  uint4* h;              // gate_up: output in the chunk layout, [I / 64][8][R]
  float* out;            // gate_up zeroes it, down accumulates into it ([T, H])
  int64_t out_vec4;      // gate_up: float4s of out to zero
  const float* weights;  // down: routing weight per pair
};


struct Item {
  int expert, start, count, rb;
};

// Pair rows of B's box (= the wgmma width) for `count` pairs of an item
// (<= 128): 128 from 65 pairs on, else 64, or 48 with fine boxes up to 48
// pairs. Why: at 8192 Kimi tokens an expert's ~171 pairs (+-13) leave a
// partial tile of ~43; rounded to 64, 14% of the MMAs and B copies were
// padding (8% now). (32-row boxes too made ptxas serialize the wgmmas, C7512, of
// down's and the wide gate_up's kernels: one K loop per width is inlined.)
__device__ __forceinline__ int box_rows(int count, bool fine) {
  if (count > 64) return 128;
  return fine && count <= 48 ? 48 : 64;
}
__device__ __forceinline__ const CUtensorMap& act_box(const Params& p, int rows) {
  return rows == 128 ? p.act128 : rows == 96 ? p.act96 : rows == 64 ? p.act64 : rows == 48 ? p.act48 : p.act32;
}
// f(std::integral_constant<int, rows>) for rows = box_rows(count, kFine):
// one instantiation of an item's K loop per box width.
template <bool kFine, class F>
__device__ __forceinline__ void with_box_rows(int rows, F&& f) {
  if (rows == 128) f(std::integral_constant<int, 128>{});
  else if (!kFine || rows == 64) f(std::integral_constant<int, 64>{});
  else f(std::integral_constant<int, 48>{});
}

// Item `item` of a tile map in tiles of up to kPairs pairs (kTilePairs here,
// twice that for the wide gate_up items of fused_moe_ws_wide.cu).
template <int kPairs = kTilePairs>
__device__ __forceinline__ Item item_at(const MoeScratch& s, int item, int row_blocks) {
  Item it;
  const int tile = item / row_blocks;
  it.rb = item - tile * row_blocks;
  it.expert = s.tile_expert[tile];
  it.start = s.tile_start[tile];
  it.count = min(kPairs, s.offsets[it.expert + 1] - it.start);
  return it;
}

// A copy cursor's position in the CTA's (item, K tile) sequence and its ring
// slot (kS stages). `Cursor` is the one that owns it (Producer,
// WideProducer): start_item(p, row_blocks) reads the item's copy coordinates.
template <class Cursor, int kS>
struct RingPosition {
  int item, j, st;
  uint32_t phase;

  __device__ __forceinline__ void init(Cursor& c, const Params& p, int items, int row_blocks) {
    item = blockIdx.x, j = 0, st = 0, phase = 0;
    if (item < items) c.start_item(p, item, row_blocks);
  }

  // After a K tile's copies: the next slot, and the next item after its last tile.
  __device__ __forceinline__ void advance(Cursor& c, const Params& p, int items, int row_blocks) {
    if (++st == kS) st = 0, phase ^= 1;
    if (++j == p.K / kTileK) {
      j = 0;
      item += gridDim.x;
      if (item < items) c.start_item(p, item, row_blocks);
    }
  }
};

// B shared by a cluster of kCluster CTAs on adjacent row blocks of one tile
// (the wide gate_up, MoeConfig::ws_gate_up_cluster; 1 = none): each CTA's
// copy cursor copies chunks c rank .. c rank + c - 1 (c = 8 / kCluster) of
// every B stage, at their place in the box's chunk-major layout, into every
// CTA of the cluster by TMA multicast (set_maps, fused_moe_ws.cu, made B's
// boxes c chunks deep), so B is read from L2 kCluster times less often. The persistent
// stepping item += gridDim.x keeps a cluster's CTAs on one tile: the grid and
// row_blocks are multiples of kCluster. A stage is refilled once the MMA
// warps of every CTA gave it back: lane i of each warp arrives on CTA i's
// `empty` barrier (release_stage), CTA-scope as CUTLASS's consumer release
// (session 12's cluster-scope releases put a MEMBAR.ALL.GPU before each
// arrival: 55% slower). Why: B's L2 reads were the busiest unit after the
// tensor pipe (ncu, session 14: the wide gate_up's L2 74.5%), and a probe
// reading half of B ran gate_up 15% faster (session 12). Measured
// (bench/mxfp4/results-prefill-2026-12-02-s15.md): 2 CTAs 3-5% faster at
// 8192 Kimi tokens; 4 CTAs slower; the same in down's 256-row items no gain;
// in down on the wide items (session 18) down 3.2 ms against 3.6 with B per CTA.
template <int kCluster>
__device__ __forceinline__ void copy_b(uint32_t dst, const CUtensorMap& map, int rows, int pair0, int j,
                                       uint32_t full) {
  if constexpr (kCluster > 1) {
    constexpr uint16_t kAll = (1u << kCluster) - 1;
    const int c0 = 8 / kCluster * int(dev::cluster_ctarank());
    dev::tma_2d_multicast(dst + c0 * rows * 16, map, pair0 * 2, j * 8 + c0, full, kAll);
  } else {
    dev::tma_2d(dst, map, pair0 * 2, j * 8, full);
  }
}

// A warp gives stage barrier `bar` back: lane 0 arrives on this CTA's
// barrier; with kCluster > 1 lane i on CTA i's (each CTA's copy cursor copies
// into this stage).
template <int kCluster>
__device__ __forceinline__ void release_stage(uint32_t bar, int lane) {
  if constexpr (kCluster > 1) {
    if (lane < kCluster) dev::mbar_arrive_cluster(bar, uint32_t(lane));
  } else if (lane == 0) {
    dev::mbar_arrive(bar);
  }
}

// The copy side of the ring of kS stages, run by one thread (the RS kernels:
// the producer warpgroup's thread 0; the SS kernel: MMA thread 0): a cursor
// over the CTA's (item, K tile) sequence.
template <int kS>
struct Producer {
  RingPosition<Producer, kS> at;
  int strip0, start, rows;

  __device__ __forceinline__ void start_item(const Params& p, int item, int row_blocks) {
    const Item it = item_at(p.s, item, row_blocks);
    strip0 = it.expert * (p.N / kStripRows) + it.rb * kItemStrips;
    start = it.start;
    rows = box_rows(it.count, p.fine_boxes);
  }

  __device__ __forceinline__ void init(const Params& p, int items, int row_blocks) {
    at.init(*this, p, items, row_blocks);
  }

  // Copies the next K tile into its stage once every consumer warp gave the
  // stage back; nothing once the CTA's items are all issued.
  __device__ __forceinline__ void issue(const Params& p, uint32_t base, uint32_t bars, int items,
                                        int row_blocks) {
    if (at.item >= items) return;
    const int st = at.st, j = at.j;
    const uint32_t full = bars + 8 * st;
    dev::mbar_wait_parity(bars + 8 * (kS + st), at.phase ^ 1);
    dev::mbar_arrive_expect_tx(full, kCodeStage + kScaleStage + rows * 8 * 16);
    const uint32_t sb = base + st * kStageBytes;
    dev::tma_2d(sb + kActStage, p.codes, j * (kTileCodeBytes / 8), strip0, full);
    dev::tma_2d(sb + kActStage + kCodeStage, p.scales, j * (kTileScaleBytes / 8), strip0, full);
    dev::tma_2d(sb, act_box(p, rows), start * 2, j * 8, full);
    at.advance(*this, p, items, row_blocks);
  }
};

// The RS kernels' split after their setup: the producer warpgroup hands
// its registers to the MMA warpgroups and its thread 0 runs a Cursor
// (Producer, WideProducer) over every (item, K tile) stage of the CTA, each
// copied as soon as its slot is free; returns true on the producer
// warpgroup's threads, which then leave the kernel.
// `others` runs on the producer warpgroup's warps 1..3 (down's adders; by
// default nothing).
struct NoOthers {
  __device__ __forceinline__ void operator()() const {}
};
// kMma: the MMA warps' registers; the producer warpgroup gets the rest.
template <class Cursor, int kMma = kMmaRegs, class Others = NoOthers>
__device__ __forceinline__ bool run_producer(const Params& p, uint32_t base, uint32_t bars, int items,
                                             int row_blocks, Others others = {}) {
  constexpr int kRest = (kRsThreads * launch_regs(kRsThreads) - kThreads * kMma) / kProducerThreads / 8 * 8;
  static_assert(kRest >= kProducerRegs, "the producer warpgroup needs registers too");
  if (threadIdx.x >= kThreads) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRest));
    if (threadIdx.x == kThreads) {
      Cursor prod;
      prod.init(p, items, row_blocks);
      while (prod.at.item < items) prod.issue(p, base, bars, items, row_blocks);
    } else if (threadIdx.x >= kFirstAdder) {
      others();
    }
    return true;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kMma));
  return false;
}

// Keeps the A registers a just-retired wgmma group read from being reused
// before the wait that retired it (the compiler does not see the async read).
__device__ __forceinline__ void keep_registers(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(a[kk][r])::"memory");
}

// gate_up's CTAs zero `out` for down's atomic adds (stream order makes it
// safe): `threads` threads of each CTA, this one number `thread` of them
// (the SS kernel: all of its threads, before its K loops).
__device__ __forceinline__ void zero_out_for_down(const Params& p, int thread, int threads) {
  float4* o = reinterpret_cast<float4*>(p.out);
  const int64_t stride = int64_t(gridDim.x) * threads;
#pragma unroll 1
  for (int64_t i = int64_t(blockIdx.x) * threads + thread; i < p.out_vec4; i += stride)
    o[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// The RS gate_up kernels: warps 1..3 of the producer warpgroup (idle in
// gate_up; down's adders) zero `out` while the MMA warps run, through
// run_producer's `others`. Why: every thread zeroed it before the K loops
// until session 18, T x H floats (235 MB at 8192 Kimi tokens, ~60-80 us of
// HBM writes) with the tensor cores idle.
struct ZeroOutForDown {
  const Params& p;
  __device__ __forceinline__ void operator()() const {
    zero_out_for_down(p, threadIdx.x - kFirstAdder, kAdderThreads);
  }
};

// gate_up epilogue of one consumer warpgroup: its 8 strips are the 64 h
// columns of h's K tile 2 rb + wg. h = SiLU(gate) * up goes to the staging
// area in the chunk layout, then out as whole 16-byte rows.
__device__ __forceinline__ void store_h(const Params& p, const Item& it, int wg, uint32_t staging,
                                        const float (&acc)[2][64]) {
  const int tid = threadIdx.x & 127, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
  named_barrier(1 + wg, 128);  // the previous item's copy-out has read the staging area
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int lc = mma_logical_col((m * 4 + w) * 8 + g);
    const uint32_t col = staging + (lc >> 3) * kChunkBytes + (lc & 7) * 2;
#pragma unroll
    for (int nb = 0; nb < kTilePairs / 8; ++nb)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float gate = acc[m][4 * nb + j], up = acc[m][4 * nb + 2 + j];
        const float silu = gate / (1.f + __expf(-gate));
        sts16(col + (nb * 8 + 2 * t + j) * 16, dev::float_to_bf16_bits(silu * up));
      }
  }
  named_barrier(1 + wg, 128);
  const size_t jh = size_t(it.rb) * 2 + wg;
  for (int q = tid; q < 8 * it.count; q += 128) {
    const int c = q / it.count, n = q - c * it.count;
    p.h[(jh * 8 + c) * p.R + it.start + n] = dev::lds128(staging + c * kChunkBytes + n * 16);
  }
}

// down epilogue: out[token, row] += weight * y, FP32 atomics.
__device__ __forceinline__ void add_out(const Params& p, const Item& it, int wg,
                                        const float (&acc)[2][64]) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int H = p.N;
#pragma unroll
  for (int nb = 0; nb < kTilePairs / 8; ++nb)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int n = nb * 8 + 2 * t + j;
      if (n >= it.count) continue;
      const int pair = p.s.sorted_pairs[it.start + n];
      const float wt = p.weights[pair];
      float* o = p.out + size_t(pair / p.topk) * H + (it.rb * kItemStrips + wg * 8 + w) * kStripRows + g;
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        atomicAdd(o + m * 4 * kStripRows, wt * acc[m][4 * nb + j]);
        atomicAdd(o + m * 4 * kStripRows + 8, wt * acc[m][4 * nb + 2 + j]);
      }
    }
}

struct NoPending {
  __device__ __forceinline__ void step(const Params&, int) {}
};

// down's deferred epilogue. stage() puts an item's 128 results per thread in
// shared memory (this thread's slots only: no barrier); step(k), called once
// per K tile of the next item between its wgmma groups, adds step k's 4
// values (pair n(k), rows g, g + 8 of both strips) into out with FP32
// atomics, so the MMA warps keep the tensor pipe fed instead of spending the
// whole add after each item (ncu, 8192 tokens: 5.68 ms for down's 1.92 TFLOP
// against gate_up's 439 TFLOP/s). The pair and weight of step k + 1 are
// loaded one step ahead (L2 latency off the warp's path). Steps from kSteps
// on are not staged: stage() adds them at once.
template <int kSteps>
struct DeferredAdd {
  uint32_t slots;   // shared address of this thread's step 0
  int start = 0;    // staged item's first pair in the sorted order
  int count = 0;    // its pairs (0: nothing staged)
  int col = 0;      // out column of row g of the first strip
  int token = 0;    // step k's token
  float wt = 0.f;   // and routing weight
  int next_pair = 0;  // step k + 1's pair

  // Pair column of step k for this lane: nb = k / 2, j = k % 2; increasing in k.
  __device__ __forceinline__ static int n_of(int k) { return (k >> 1) * 8 + 2 * (threadIdx.x & 3) + (k & 1); }

  __device__ __forceinline__ void stage(const Params& p, const Item& it, int wg, const float (&acc)[2][64]) {
    const int w = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int nb = k >> 1, j = k & 1;
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(slots + k * kThreads * 16),
                   "f"(acc[0][4 * nb + j]), "f"(acc[0][4 * nb + 2 + j]), "f"(acc[1][4 * nb + j]),
                   "f"(acc[1][4 * nb + 2 + j])
                   : "memory");
    }
    start = it.start;
    count = it.count;
    col = (it.rb * kItemStrips + wg * 8 + w) * kStripRows + g;
    if (n_of(0) < count) {
      const int pair = __ldg(p.s.sorted_pairs + start + n_of(0));
      token = pair / p.topk;
      wt = __ldg(p.weights + pair);
    }
    if (n_of(1) < count) next_pair = __ldg(p.s.sorted_pairs + start + n_of(1));
#pragma unroll
    for (int k = kSteps; k < kAllSteps; ++k) {
      const int nb = k >> 1, j = k & 1;
      if (n_of(k) >= count) break;
      const int pair = __ldg(p.s.sorted_pairs + start + n_of(k));
      const float f = __ldg(p.weights + pair);
      float* o = p.out + size_t(pair / p.topk) * p.N + col;
      atomicAdd(o, f * acc[0][4 * nb + j]);
      atomicAdd(o + 8, f * acc[0][4 * nb + 2 + j]);
      atomicAdd(o + 4 * kStripRows, f * acc[1][4 * nb + j]);
      atomicAdd(o + 4 * kStripRows + 8, f * acc[1][4 * nb + 2 + j]);
    }
  }

  __device__ __forceinline__ void step(const Params& p, int k) {
    if (k >= kSteps || n_of(k) >= count) return;
    const float4 v = lds_f32x4(slots + k * kThreads * 16);
    float* o = p.out + size_t(token) * p.N + col;
    atomicAdd(o, wt * v.x);
    atomicAdd(o + 8, wt * v.y);
    atomicAdd(o + 4 * kStripRows, wt * v.z);
    atomicAdd(o + 4 * kStripRows + 8, wt * v.w);
    if (k + 1 < kSteps && n_of(k + 1) < count) {
      token = next_pair / p.topk;
      wt = __ldg(p.weights + next_pair);
    }
    if (k + 2 < kSteps && n_of(k + 2) < count) next_pair = __ldg(p.s.sorted_pairs + start + n_of(k + 2));
  }

  // Steps [k0, kSteps): what an item of fewer K tiles left, or the last item.
  __device__ __forceinline__ void finish(const Params& p, int k0) {
    for (int k = k0; k < kSteps; ++k) step(p, k);
  }

  __device__ __forceinline__ static float4 lds_f32x4(uint32_t a) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a) : "memory");
    return v;
  }
};

// down's epilogue on the producer warpgroup (MoeConfig::ws_down_epilogue 4
// and 5, RS kernel). After an item the MMA warps only round their results to
// BF16 into a packed area and go on with the next item; warps 1..3 of the
// producer warpgroup (the adders) add weight * y into out with 16-byte vector
// reductions while that item's K loop runs. Before, the MMA warps issued 4
// scalar FP32 atomics per K tile between their wgmma groups (DeferredAdd),
// which also cost the registers of a deeper wgmma queue in down. BF16 is the
// precision a peer's per-pair down output (BF16 rows summed afterwards) has;
// the sum over an token's experts stays FP32.
// Shared memory of the adder epilogue for items of kRows weight rows x up to
// kPairs pairs, from the packed area's address on: the packed area, the
// adders' (token, routing weight) of each pair in two buffers, then the
// `staged` and `drained` barriers (one base address: the adders' loop keeps
// fewer registers). Packed word (q, r) = BF16 y of pairs 2q (low half) and
// 2q + 1 (high) at row r of the item; a row of q is kRows words + 8 of
// padding, so that the MMA warps' 4-byte stores (lanes g, t: q = 4 nb + t,
// r = ... + g) hit 32 banks and an adder's 16-byte load is 4 rows of two
// pairs.
template <int kRows, int kPairs>
struct AdderArea {
  static constexpr int kItemRows = kRows, kItemPairs = kPairs;
  static constexpr int kRowWords = kRows + 8;
  static constexpr int kTableOffset = kPairs / 2 * kRowWords * 4;
  static constexpr int kBarsOffset = kTableOffset + 2 * kPairs * 8;
  static constexpr int kBytes = kBarsOffset + 16;
  __device__ __forceinline__ static uint32_t word(uint32_t packed, int q, int r) {
    return packed + (q * kRowWords + r) * 4;
  }
};
using DownArea = AdderArea<kItemRows, kTilePairs>;  // 67584 + 2048 + 16 bytes

__device__ __forceinline__ void sts32(uint32_t a, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// MMA warps: the first kFloats accumulators of one m64 fragment into the
// packed area. acc[4 nb + j] is pair 8 nb + 2 t + j at row r (this lane's
// row g of its strip), acc[4 nb + 2 + j] the same at row r + 8.
template <class Area, int kFloats, int N>
__device__ __forceinline__ void pack_fragment(uint32_t packed, int r, const float (&acc)[N]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int nb = 0; nb < kFloats / 4; ++nb) {
    const uint32_t a = Area::word(packed, nb * 4 + t, r);
    sts32(a, bf16x2_bits(acc[4 * nb], acc[4 * nb + 1]));
    sts32(a + 8 * 4, bf16x2_bits(acc[4 * nb + 2], acc[4 * nb + 3]));
  }
}

// The 256-row items' results (the first kCols pairs): strip (wg, m, w).
template <int kCols>
__device__ __forceinline__ void pack_results(uint32_t packed, int wg, const float (&acc)[2][64]) {
  const int w = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int m = 0; m < 2; ++m)
    pack_fragment<DownArea, kCols / 2>(packed, (wg * 8 + m * 4 + w) * kStripRows + g, acc[m]);
}

__device__ __forceinline__ void red_add_v4(float* o, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(o), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// The adders: for each item of the CTA (the same sequence as the MMA
// warps'), the pairs' tokens and weights into the table (before the results
// are there), then per pair pair and 4 rows one 16-byte load and a vector
// reduction per pair. `staged` completes when all 256 MMA threads stored an
// item; `drained` when all adders read it.
template <class Area>
__device__ __forceinline__ void run_adders(const Params& p, uint32_t packed, int items, int row_blocks) {
  constexpr int kRows = Area::kItemRows, kPairs = Area::kItemPairs;
  // Adder a takes row group a % kGroups (rows 4 g .. 4 g + 3) of every
  // kSlices-th pair pair from a / kGroups: a warp's 16-byte loads are a
  // contiguous 512 bytes of the packed area, its reductions 512 contiguous
  // bytes of out. 256-row items: 64 groups, kSlices 1, adders 64..95 only
  // fill the table (the adds keep pace with the items: not measured
  // otherwise). The loop fits the producer warpgroup's 40 registers (24 with
  // two wgmma groups in flight: 20-24 bytes spill); 32-bit offsets into out
  // (check_moe_prefill_ws: T x H < 2^32).
  constexpr int kGroups = kRows / 4, kSlices = kAdderThreads / kGroups;
  const int a = threadIdx.x - kFirstAdder, slice = a / kGroups;
  const uint32_t table = packed + Area::kTableOffset, staged = packed + Area::kBarsOffset, drained = staged + 8;
  uint32_t phase = 0;
#pragma unroll 1
  for (int item = blockIdx.x; item < items; item += gridDim.x, phase ^= 1) {
    const Item it = item_at<kPairs>(p.s, item, row_blocks);
    const uint32_t tab = table + phase * (kPairs * 8);
#pragma unroll 1
    for (int n = a; n < it.count; n += kAdderThreads) {
      const int pair = __ldg(p.s.sorted_pairs + it.start + n);
      asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(tab + n * 8), "r"(pair / p.topk),
                   "r"(__float_as_uint(__ldg(p.weights + pair)))
                   : "memory");
    }
    dev::mbar_wait_parity(staged, phase);
    // The table is complete, and every adder is done with the item before
    // last, whose buffer the next item's table takes.
    named_barrier(3, kAdderThreads);
    if (slice < kSlices) {
      const int rg = a - slice * kGroups;
      const uint32_t col = it.rb * kRows + rg * 4;
      uint32_t src = Area::word(packed, slice, rg * 4), pt = tab + slice * 16;
#pragma unroll 1
      for (int n = 2 * slice; n < it.count;
           n += 2 * kSlices, src += kSlices * Area::kRowWords * 4, pt += kSlices * 16) {
        const uint4 v = dev::lds128(src);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (n + h >= it.count) break;
          uint32_t tok, wbits;
          asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(tok), "=r"(wbits) : "r"(pt + h * 8));
          const float wt = __uint_as_float(wbits);
          const auto y = [h](uint32_t x) { return __uint_as_float(h ? x & 0xFFFF0000u : x << 16); };
          red_add_v4(p.out + (tok * uint32_t(p.N) + col), wt * y(v.x), wt * y(v.y), wt * y(v.z), wt * y(v.w));
        }
      }
    }
    dev::mbar_arrive(drained);
  }
}

// fused_moe_ws_ss.cu: gate_up and down with a dequant warpgroup feeding SS
// wgmma (MoeConfig::ws_dequant 2 and 3). down_epilogue: 1 = FP32 atomics after
// each item, else the deferred adds of the first 8 steps (the A ring leaves
// no room for more).
void launch_gate_up_ss(const Params& p, bool big, int ctas, cudaStream_t stream);
void launch_down_ss(const Params& p, bool big, int down_epilogue, int ctas, cudaStream_t stream);

// fused_moe_ws_wide.cu: gate_up on items of 128 rows x one tile of up to 256
// pairs, 224 with Params::tail96 (MoeConfig::ws_gate_up_items 2). The tile
// map must be in tiles of as many pairs (launch_tile_map), the maps made by
// set_maps with kWideStrips-strip weight boxes and, with `cluster` 2, B boxes
// of half a K tile.
void launch_gate_up_wide(const Params& p, bool big, int cluster, int ctas, cudaStream_t stream);
// The same file: down on the same items (128 rows of w2 x a tile of the wide
// tile map, MoeConfig::ws_down_items 2, 3) with the adders' epilogue; the maps
// as for launch_gate_up_wide (B = h).
void launch_down_wide(const Params& p, bool big, int cluster, int ctas, cudaStream_t stream);

}  // namespace mx::cuda::ws
