// Streamed decode kernels of the fused MoE (MoeConfig::weight_loads 7, routed
// path; docs/kernels.md, "MoE decode, streamed weights"). Why: the register
// kernels stream the experts' weights at ~1.25x of the copy floor, about the
// rate of a launch of plain 16-byte loads spread over the whole weight, while
// one bulk copy engine per SM streaming a contiguous range into a shared-memory
// ring reads 140 MB at ~1.09x (mxfp4_bench --read-probe, 2026-12-01). So here
// each SM runs one persistent CTA over a contiguous range of work units:
//  - a unit is one 16-row strip of one active expert (gate_up: 8 gate + 8 up
//    rows, so SiLU(gate) * up stays inside the unit), all of K, for up to 8 of
//    the expert's pairs (more pairs: the unit is streamed again per 8);
//  - warp 16 (one lane) copies a unit's weights stage by stage, 16 K tiles
//    (8 KB of codes, 512 B of scales) per stage, two bulk copies completing
//    on the stage's mbarrier, into a 16-stage ring;
//  - warps 0-15 each take one tile of every stage: codes and scales from
//    shared memory, the pairs' activations from global memory (L1: a CTA's
//    consecutive units are mostly one expert's strips), dequant + mma.sync
//    into FP32; at the end of a unit they leave their sums in one of 4
//    shared-memory buffers and go on with the next unit;
//  - warp 17 adds a buffer's 16 partial sums and writes the unit's results:
//    gate_up SiLU(gate) * up as BF16 h, down weight * y added into out with
//    FP32 atomics.
// Units are cut evenly over the CTAs in expert-major order, so every SM reads
// about the same bytes. down is launched with programmatic dependent launch:
// its copies start before gate_up's results are complete; its MMA and
// epilogue warps wait for them (griddepcontrol.wait) first.
#include <cuda_runtime.h>

#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/fused_moe_decode.h"
#include "cuda/moe_decode_common.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/per_device_once.h"

namespace mx::cuda {

namespace {

constexpr int kMmaWarps = 16;
constexpr int kWarpTiles = 2;  // tiles of each stage per MMA warp, two independent MMA chains
constexpr int kStageTiles = kMmaWarps * kWarpTiles;
constexpr int kStages = 10;
constexpr int kBufs = 2;  // partial-sum buffers between the MMA warps and the epilogue warp
constexpr int kPassPairs = 8;  // pairs per pass over a unit (one mma.sync column group)
constexpr int kProducerWarp = kMmaWarps, kEpilogueWarp = kMmaWarps + 1;
constexpr int kThreads = 32 * (kMmaWarps + 2);
constexpr int kStageCodeBytes = kStageTiles * kTileCodeBytes;
constexpr int kStageBytes = kStageCodeBytes + kStageTiles * kTileScaleBytes;
constexpr int kRingBytes = kStages * kStageBytes;
constexpr int kPartialBytes = kBufs * kMmaWarps * 32 * 16;
constexpr int kSmemBytes = kRingBytes + kPartialBytes + 8 * (2 * kStages + 2 * kBufs);
static_assert(kStageBytes % 16 == 0 && kRingBytes % 16 == 0);

struct StreamArgs {
  const uint8_t* codes;   // expert e's strip s starts at tile (e * strips + s) * KT
  const uint8_t* scales;
  const uint16_t* act;    // gate_up: x [T, H], row = pair / topk; down: h [pairs, I], row = pair
  int act_stride;         // elements per activation row
  int KT;                 // K tiles per strip
  int strips;             // strips per expert
  int topk, H, I;
  MoeScratch s;
  const float* weights;   // down: routing weight per pair
  float* out;             // gate_up zeroes it; down adds into it
  int64_t out_elems;
};

// The unit sequence of this CTA; every warp role walks it the same way.
struct UnitRange {
  int u0, u1;
};
__device__ __forceinline__ UnitRange cta_units(const StreamArgs& a) {
  const long total = long(*a.s.num_active) * a.strips;
  return {int(total * blockIdx.x / gridDim.x), int(total * (blockIdx.x + 1) / gridDim.x)};
}

struct Unit {
  int active, e, strip, cnt;
  const int* pairs;
};
// The unit's expert is looked up (three dependent global loads) only when it
// differs from the previous unit's: a CTA's range holds few experts, and a
// lookup per unit stalled every role for a round trip per unit.
struct UnitCursor {
  Unit un{-1, 0, 0, 0, nullptr};
  __device__ __forceinline__ const Unit& at(const StreamArgs& a, int u) {
    const int active = u / a.strips;
    if (active != un.active) {
      const int e = a.s.active[active], beg = a.s.offsets[e];
      un = {active, e, 0, a.s.offsets[e + 1] - beg, a.s.sorted_pairs + beg};
    }
    un.strip = u - active * a.strips;
    return un;
  }
};

struct Smem {
  uint32_t ring, partial, full, empty, pfull, pempty;
  __device__ uint32_t full_bar(int slot) const { return full + 8 * slot; }
  __device__ uint32_t empty_bar(int slot) const { return empty + 8 * slot; }
  __device__ uint32_t pfull_bar(int b) const { return pfull + 8 * b; }
  __device__ uint32_t pempty_bar(int b) const { return pempty + 8 * b; }
};

// The activation row of pair p: x's token row (gate_up) or h's pair row (down).
template <bool kGateUp>
__device__ __forceinline__ const uint16_t* act_row(const StreamArgs& a, int p) {
  return a.act + size_t(kGateUp ? p / a.topk : p) * a.act_stride;
}

// One lane copies each stage's codes and scales once its slot is free.
__device__ __forceinline__ void produce(const StreamArgs& a, const Smem& sm, UnitRange r) {
  const int stages = (a.KT + kStageTiles - 1) / kStageTiles;
  UnitCursor cur;
  uint32_t q = 0;
  for (int u = r.u0; u < r.u1; ++u) {
    const Unit& un = cur.at(a, u);
    const size_t tile0 = (size_t(un.e) * a.strips + un.strip) * a.KT;
    for (int c0 = 0; c0 < un.cnt; c0 += kPassPairs)
      for (int st = 0; st < stages; ++st, ++q) {
        const int slot = q % kStages, round = q / kStages;
        const int n = min(kStageTiles, a.KT - st * kStageTiles);
        const uint32_t dst = sm.ring + slot * kStageBytes, bar = sm.full_bar(slot);
        if (round > 0) dev::mbar_wait_parity(sm.empty_bar(slot), (round - 1) & 1);
        const size_t tile = tile0 + size_t(st) * kStageTiles;
        dev::mbar_arrive_expect_tx(bar, n * (kTileCodeBytes + kTileScaleBytes));
        dev::bulk_copy_g2s(dst, a.codes + tile * kTileCodeBytes, n * kTileCodeBytes, bar);
        dev::bulk_copy_g2s(dst + kStageCodeBytes, a.scales + tile * kTileScaleBytes, n * kTileScaleBytes, bar);
      }
  }
}

// A padding column of a pass (pairs past the expert's count) reads the pass's
// first pair (never stored). The activations of a stage's two tiles are
// requested before the wait for its weights, so their latency overlaps it.
template <bool kBig, bool kGateUp>
__device__ __forceinline__ void multiply(const StreamArgs& a, const Smem& sm, UnitRange r, int warp) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int stages = (a.KT + kStageTiles - 1) / kStageTiles;
  const uint32_t lane_code = warp * kTileCodeBytes + lane * 16;
  const uint32_t lane_scale = kStageCodeBytes + warp * kTileScaleBytes + ((t >> 1) * 8 + g) * 2;
  UnitCursor cur;
  int row_active = -1, row_c0 = -1;
  const uint16_t* row = nullptr;
  uint32_t q = 0, pass = 0;
  for (int u = r.u0; u < r.u1; ++u) {
    const Unit& un = cur.at(a, u);
    for (int c0 = 0; c0 < un.cnt; c0 += kPassPairs, ++pass) {
      if (un.active != row_active || c0 != row_c0) {
        row_active = un.active, row_c0 = c0;
        row = act_row<kGateUp>(a, un.pairs[c0 + g < un.cnt ? c0 + g : c0]) + 16 * t;
      }
      float acc[kWarpTiles][1][4] = {};
      for (int st = 0; st < stages; ++st, ++q) {
        const int slot = q % kStages, round = q / kStages;
        uint4 xa[kWarpTiles][1][2];
#pragma unroll
        for (int i = 0; i < kWarpTiles; ++i) {
          const int kt = st * kStageTiles + i * kMmaWarps + warp;
          if (kt < a.KT) {
            xa[i][0][0] = dev::load_act(row + kt * kTileK);
            xa[i][0][1] = dev::load_act(row + kt * kTileK + 8);
          }
        }
        dev::mbar_wait_parity(sm.full_bar(slot), round & 1);
        const uint32_t base = sm.ring + slot * kStageBytes;
        uint4 w[kWarpTiles];
        uint32_t sc[kWarpTiles];
#pragma unroll
        for (int i = 0; i < kWarpTiles; ++i) {
          w[i] = dev::lds128(base + lane_code + i * kMmaWarps * kTileCodeBytes);
          sc[i] = dev::lds_u16(base + lane_scale + i * kMmaWarps * kTileScaleBytes);
        }
        __syncwarp();
        if (lane == 0) dev::mbar_arrive(sm.empty_bar(slot));  // the stage is in registers
#pragma unroll
        for (int i = 0; i < kWarpTiles; ++i)
          if (st * kStageTiles + i * kMmaWarps + warp < a.KT) dev::mma_tile<1, kBig>(w[i], sc[i], xa[i], acc[i]);
      }
#pragma unroll
      for (int i = 1; i < kWarpTiles; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[0][0][c] += acc[i][0][c];
      const int b = pass % kBufs;
      if (pass >= kBufs) dev::mbar_wait_parity(sm.pempty_bar(b), (pass / kBufs - 1) & 1);
      const uint32_t dst = sm.partial + ((b * kMmaWarps + warp) * 32 + lane) * 16;
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "f"(acc[0][0][0]), "f"(acc[0][0][1]),
                   "f"(acc[0][0][2]), "f"(acc[0][0][3])
                   : "memory");
      dev::mbar_arrive(sm.pfull_bar(b));
    }
  }
}

// The pass's pair ids (and down's routing weights) of a lane's two columns
// are loaded before the wait for the partial sums, and kept while the expert
// and pass stay the same.
template <bool kGateUp>
__device__ __forceinline__ void finish(const StreamArgs& a, const Smem& sm, UnitRange r) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  UnitCursor cur;
  int col_active = -1, col_c0 = -1;
  int pair[2] = {-1, -1};
  float weight[2] = {0.f, 0.f};
  uint32_t pass = 0;
  for (int u = r.u0; u < r.u1; ++u) {
    const Unit& un = cur.at(a, u);
    for (int c0 = 0; c0 < un.cnt; c0 += kPassPairs, ++pass) {
      if (un.active != col_active || c0 != col_c0) {
        col_active = un.active, col_c0 = c0;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int col = c0 + 2 * t + j;
          pair[j] = col < un.cnt ? un.pairs[col] : -1;
          if constexpr (!kGateUp) weight[j] = pair[j] >= 0 ? a.weights[pair[j]] : 0.f;
        }
      }
      const int b = pass % kBufs;
      dev::mbar_wait_parity(sm.pfull_bar(b), (pass / kBufs) & 1);
      float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const uint4 v = dev::lds128(sm.partial + ((b * kMmaWarps + w) * 32 + lane) * 16);
        sum[0] += __uint_as_float(v.x), sum[1] += __uint_as_float(v.y);
        sum[2] += __uint_as_float(v.z), sum[3] += __uint_as_float(v.w);
      }
      __syncwarp();
      if (lane == 0) dev::mbar_arrive(sm.pempty_bar(b));
      if constexpr (kGateUp) {
        // Fragment register j: gate row g (j < 2) / up row g (j + 2) of pair column 2t + j.
#pragma unroll
        for (int j = 0; j < 2; ++j)
          if (pair[j] >= 0) {
            const float gate = sum[j], silu = gate / (1.f + __expf(-gate));
            a.s.h[size_t(pair[j]) * a.I + un.strip * 8 + g] = dev::float_to_bf16_bits(silu * sum[j + 2]);
          }
      } else {
        // Register c: row g + 8 (c >> 1) of the strip, pair column 2t + (c & 1).
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (pair[c & 1] >= 0) {
            const int row = un.strip * kStripRows + g + 8 * (c >> 1);
            atomicAdd(a.out + size_t(pair[c & 1] / a.topk) * a.H + row, weight[c & 1] * sum[c]);
          }
      }
    }
  }
}

template <bool kBig, bool kGateUp>
__global__ void __launch_bounds__(kThreads, 1) moe_stream_kernel(StreamArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  if constexpr (kGateUp) {
    // down (launched with PDL) may start its weight copies now; it waits for
    // this grid before it reads h or touches out.
    dev::griddep_launch_dependents();
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.out_elems; i += stride) a.out[i] = 0.f;
  }
  Smem sm;
  sm.ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  sm.partial = sm.ring + kRingBytes;
  sm.full = sm.partial + kPartialBytes;
  sm.empty = sm.full + 8 * kStages;
  sm.pfull = sm.empty + 8 * kStages;
  sm.pempty = sm.pfull + 8 * kBufs;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      dev::mbar_init(sm.full_bar(i), 1);
      dev::mbar_init(sm.empty_bar(i), kMmaWarps);
    }
    for (int i = 0; i < kBufs; ++i) {
      dev::mbar_init(sm.pfull_bar(i), kMmaWarps * 32);
      dev::mbar_init(sm.pempty_bar(i), 1);
    }
    dev::fence_mbar_init();
  }
  __syncthreads();
  const UnitRange r = cta_units(a);
  const int warp = __shfl_sync(0xffffffffu, int(threadIdx.x >> 5), 0);
  if (warp == kProducerWarp) {  // weights only: they do not depend on gate_up
    if ((threadIdx.x & 31) == 0) produce(a, sm, r);
    return;
  }
  // down: h and the zeroed out come from gate_up (launched before with PDL).
  if constexpr (!kGateUp) dev::griddep_wait();
  if (warp == kEpilogueWarp) finish<kGateUp>(a, sm, r);
  else multiply<kBig, kGateUp>(a, sm, r, warp);
}

template <bool kBig, bool kGateUp>
void launch_stream(const StreamArgs& a, cudaStream_t stream, bool pdl) {
  static PerDeviceOnce smem_attribute;
  smem_attribute([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_stream_kernel<kBig, kGateUp>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  });
  launch_kernel(moe_stream_kernel<kBig, kGateUp>, dim3(unsigned(sm_count())), kThreads, kSmemBytes, stream, pdl,
                a);
}

template <bool kBig>
void launch_both(const MoeWeights& w, const uint16_t* x, const float* topk_weights, int T, int topk,
                 float* out, const MoeScratch& s, cudaStream_t stream, bool pdl) {
  const int H = w.hidden, I = w.intermediate;
  StreamArgs a{};
  a.topk = topk, a.H = H, a.I = I, a.s = s, a.weights = topk_weights, a.out = out;
  a.codes = w.w13_codes, a.scales = w.w13_scales, a.act = x, a.act_stride = H;
  a.KT = H / kTileK, a.strips = 2 * I / kStripRows, a.out_elems = int64_t(T) * H;
  launch_stream<kBig, true>(a, stream, false);
  quantize_h_for_w4a4(w, s, T * topk, stream);
  a.codes = w.w2_codes, a.scales = w.w2_scales, a.act = s.h, a.act_stride = I;
  a.KT = I / kTileK, a.strips = H / kStripRows;
  launch_stream<kBig, false>(a, stream, pdl);
}

}  // namespace

void launch_moe_decode_stream(const MoeWeights& w, const uint16_t* x, const float* topk_weights, int T,
                              int topk, float* out, const MoeScratch& s, cudaStream_t stream, bool pdl) {
  if (w.big_scales) launch_both<true>(w, x, topk_weights, T, topk, out, s, stream, pdl);
  else launch_both<false>(w, x, topk_weights, T, topk, out, s, stream, pdl);
}

}  // namespace mx::cuda
