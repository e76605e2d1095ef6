// Path 5 (warp-specialized MoE prefill) with the weights' dequantization
// taken off the MMA warps (MoeConfig::ws_dequant 2 and 3). Same work items,
// copy ring, tensor maps and epilogues as fused_moe_ws.cu (fused_moe_ws.cuh);
// what differs is who makes A:
//   * a dequant warpgroup (warps 8-11) reads each K tile's code and scale
//     tiles from the TMA stage, dequantizes them in registers (the
//     mma.m16n8k16 fragment, as the RS kernel does) and stores them with
//     stmatrix into an A stage of shared memory in wgmma's no-swizzle
//     K-major layout [8-wide K chunk][256 rows][16 bytes];
//   * the 2 MMA warpgroups issue SS wgmma (A and B from shared memory), one
//     group of 2 x 4 m64n{64,128}k16 per K tile, one group in flight, and
//     need registers only for the 128 accumulators. MMA thread 0 runs the
//     copy cursor (Producer) between its MMAs (the RS kernels moved theirs
//     to a producer warpgroup in session 12).
// Why: ncu on the RS kernel (2026-12-01, 8192 Kimi tokens) showed the tensor
// pipe 54% active in gate_up with 0.46 of 2 warps eligible per scheduler and
// "wait" (fixed-latency dependencies of the dequant) the top stall: the MMA
// warps spend their issue slots and latency on the dequant. Here the dequant
// runs up to kAStages tiles ahead on its own warps.
// Measured (H200, 2026-12-01, 8192 Kimi tokens; bench/mxfp4/
// results-prefill-2026-12-01-s7.md): SLOWER than the RS kernel, so not auto
// (MoeConfig::ws_dequant 2 and 3 select it): gate_up this way 17.88 ms per
// MoE call against 14.45 for auto in the same call, both GEMMs 19.37; the
// first version (dequant after the A-stage wait, one a_full / a_empty per
// stage for both warpgroups) 16.96 / 18.42 against 14.28. Not profiled
// (ncu did not reach it). Likely cause, from the code: the copy cursor sits
// on dequant thread 0 and each issue waits for the MMA warps' release of
// tile j - 2, so the dequant warps start tile j only when the tensor pipe
// has one group left queued; the dequant, stores and barrier round trip then
// sit on the MMA warps' path, as in the RS kernel of the time, plus the extra
// shared-memory traffic. A version with the cursor on MMA thread 0 and
// setmaxnreg hung (the register pool, see
// bench/mxfp4/raw-prefill-2026-12-01-s7/ss-producer-on-mma-setmaxnreg-unrun.patch,
// which fixes that and was not run).
// Barriers per TMA stage: full (1 arrival + bytes), empty (8 MMA warps; the
// dequant warps' code reads finish before they publish A); per A stage and
// m64 tile: a_full (the dequant warp's 32 threads, after fence.proxy.async),
// per A stage and MMA warpgroup: a_empty (its 4 warps, after the group that
// read it retired).
// Shared memory per K tile of a 128-pair item: A written 32 KB + read 32 KB,
// B read 64 KB (4 x m64 per tile), TMA writes 25 KB: ~150 B per 1024 tensor
// cycles, within the 128 B/clk of shared memory only at <= 85% of the MMA
// peak: the ceiling of this layout.
#include <cuda.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/fused_moe_ws.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/per_device_once.h"
#include "cuda/wgmma_rs.cuh"

namespace mx::cuda::ws {

namespace {

constexpr int kDequantThreads = 128;
constexpr int kSsThreads = kThreads + kDequantThreads;  // 2 MMA warpgroups + 1 dequant
// setmaxnreg moves registers within what the CTA got at launch (384 x 168 =
// 64512), not the whole file: 2 x 128 x 200 + 128 x 112 = 65536 made the
// MMA warps' setmaxnreg.inc wait forever (2026-12-01, the SS rows hung).
constexpr int kDequantRegs = 104, kSsMmaRegs = 200;
static_assert(kThreads * kSsMmaRegs + kDequantThreads * kDequantRegs <= kSsThreads * launch_regs(kSsThreads),
              "more registers than launched with");
constexpr int kSsStages = 5;                            // TMA ring
constexpr int kAStages = 2;                             // BF16 A ring
// The copy cursor runs on MMA thread 0, kLead tiles ahead of the tile being
// consumed: issued right after the release of tile j - 1, tile j + kLead
// needs the stage of j - 2, released a tile earlier, so thread 0 seldom
// waits. (On dequant thread 0 it had to wait for the MMA warps' latest
// release before each tile, and the dequant warps behind it: 2026-12-01,
// 8192 Kimi tokens, 17.0-17.9 ms against 14.3-14.5 ms for the RS kernel.)
constexpr int kLead = kSsStages - 2;
constexpr int kAChunkBytes = kItemRows * 16;      // 8 K values of 256 rows: 4096
constexpr int kAStageBytes = 8 * kAChunkBytes;    // one 64-wide K tile: 32768
// down's deferred epilogue here: the first 8 of 32 steps (32 KB) staged.
constexpr int kSsDeferSteps = 8;
constexpr int ss_smem_bytes(bool gate_up, int defer_steps) {
  return kSsStages * kStageBytes + kAStages * kAStageBytes +
         (gate_up ? 2 * kStagingBytes : defer_steps * kThreads * 16) + (2 * kSsStages + 6 * kAStages) * 8;
}
static_assert(ss_smem_bytes(true, 0) <= 227 * 1024, "shared memory of one SM exceeded");
static_assert(ss_smem_bytes(false, kSsDeferSteps) <= 227 * 1024, "shared memory of one SM exceeded");

// BF16 wgmma with A and B from shared memory, one specialization per n (the
// instruction names every accumulator register); edit them together.
template <int NB>  // n = 64 * NB
struct WgmmaSsBf16;

template <>
struct WgmmaSsBf16<1> {
  template <int N>
  __device__ __forceinline__ static void mma(float (&d)[N], uint64_t a_desc, uint64_t b_desc) {
    static_assert(N >= 32, "accumulator array too small for n = 64");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a_desc), "l"(b_desc)
        : "memory");
  }
};

template <>
struct WgmmaSsBf16<2> {
  template <int N>
  __device__ __forceinline__ static void mma(float (&d)[N], uint64_t a_desc, uint64_t b_desc) {
    static_assert(N >= 64, "accumulator array too small for n = 128");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a_desc), "l"(b_desc)
        : "memory");
  }
};

// A: K-major, no swizzle, chunks of 256 rows: leading (K) byte offset 4096,
// stride (M) byte offset 128 (8 rows).
__device__ __forceinline__ uint64_t a_desc(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(kAChunkBytes >> 4) << 16) | (uint64_t(128 >> 4) << 32);
}

// Four 8x8 BF16 matrices from the mma fragment layout (register i = matrix i,
// lane l gives row l % 8 of matrix l / 8).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&a)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a[0]),
               "r"(a[1]), "r"(a[2]), "r"(a[3])
               : "memory");
}

// An A stage is handed over per m64 tile: a_full[stage][q] (the 32 threads of
// dequant warp q, which makes m64 tile q = rows 64 q ..) and a_empty[stage][wg]
// (the 4 warps of MMA warpgroup wg, which reads m64 tiles 2 wg, 2 wg + 1), so
// each MMA warpgroup waits only for its two dequant warps and they only for it.
struct Rings {
  uint32_t base;   // TMA stages
  uint32_t abase;  // A stages
  uint32_t bars;   // full[kSsStages], empty[kSsStages], a_full[kAStages][4], a_empty[kAStages][2]
  __device__ __forceinline__ uint32_t full(int st) const { return bars + 8 * st; }
  __device__ __forceinline__ uint32_t empty(int st) const { return bars + 8 * (kSsStages + st); }
  __device__ __forceinline__ uint32_t a_full(int st, int q) const {
    return bars + 8 * (2 * kSsStages + 4 * st + q);
  }
  __device__ __forceinline__ uint32_t a_empty(int st, int wg) const {
    return bars + 8 * (2 * kSsStages + 4 * kAStages + 2 * st + wg);
  }
};

// The dequant warpgroup: warp dw makes strips 4 dw .. 4 dw + 3 of every K
// tile (m64 tile dw % 2 of MMA warpgroup dw / 2) over the CTA's items, in
// the MMA warps' order.
// A tile is dequantized into registers (64) as soon as its codes land, and
// only the stores wait for the A stage: from the MMA warps' release to the
// next a_full is then 16 stmatrix, not the whole dequant.
template <bool kBig>
__device__ __forceinline__ void dequant_tiles(const Params& p, const Rings& r, int items, int row_blocks) {
  const int tid = threadIdx.x - kThreads, lane = tid & 31, dw = tid >> 5, g = lane >> 2, t = lane & 3;
  // This lane's stmatrix row: matrix lane / 8 = (rows +8 if odd, chunk +1 if >= 2).
  const int mat = lane >> 3;
  const uint32_t lane_off = (mat >> 1) * kAChunkBytes + (dw * 64 + (mat & 1) * 8 + (lane & 7)) * 16;
  const int KT = p.K / kTileK;
  int st = 0, ast = 0;
  uint32_t phase = 0, aphase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x)
    for (int j = 0; j < KT; ++j) {
      dev::mbar_wait_parity(r.full(st), phase);
      const uint32_t sb = r.base + st * kStageBytes;
      uint4 wv[4];
      uint32_t sc[4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int strip = dw * 4 + s;
        wv[s] = dev::lds128(sb + kActStage + strip * kTileCodeBytes + lane * 16);
        sc[s] = dev::lds_u16(sb + kActStage + kCodeStage + strip * kTileScaleBytes + (t >> 1) * 16 + 2 * g);
      }
      uint32_t a[4][4][4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const dev::ScaleMul mul = dev::scale_multipliers<kBig>(sc[s]);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(wv[s], kk), mul, a[s][kk]);
      }
      dev::mbar_wait_parity(r.a_empty(ast, dw >> 1), aphase ^ 1);
      const uint32_t ab = r.abase + ast * kAStageBytes + lane_off;
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) stmatrix_x4(ab + 2 * kk * kAChunkBytes + s * 16 * 16, a[s][kk]);
      dev::fence_proxy_async();  // the stores before the tensor cores' reads
      dev::mbar_arrive(r.a_full(ast, dw));
      if (++st == kSsStages) st = 0, phase ^= 1;
      if (++ast == kAStages) ast = 0, aphase ^= 1;
    }
}

// K loop of one item for an MMA warpgroup: acc[m] += A rows (wg * 128 + m *
// 64 ..) x B's first 64 NB pair rows, one wgmma group per K tile; the group
// of tile j - 1 retired -> its TMA and A stages are given back.
template <int NB, class Pending>
__device__ __forceinline__ void consume_item_ss(const Params& p, const Rings& r, int wg, int items,
                                                int row_blocks, int& st, uint32_t& phase, int& ast,
                                                uint32_t& aphase, Producer<kSsStages>& prod,
                                                Pending& pending, float (&acc)[2][64]) {
  const int lane = threadIdx.x & 31;
  const int KT = p.K / kTileK;
  int prev = -1, aprev = -1;
  for (int j = 0; j < KT; ++j) {
    dev::mbar_wait_parity(r.full(st), phase);
    dev::mbar_wait_parity(r.a_full(ast, 2 * wg), aphase);
    dev::mbar_wait_parity(r.a_full(ast, 2 * wg + 1), aphase);
    const uint32_t sb = r.base + st * kStageBytes;
    const uint32_t ab = r.abase + ast * kAStageBytes + wg * 128 * 16;
    dev::wgmma_fence();
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        WgmmaSsBf16<NB>::mma(acc[m], a_desc(ab + m * 64 * 16 + 2 * kk * kAChunkBytes),
                             b_desc_rows<64 * NB>(sb + kk * NB * kChunkBytes));
    dev::wgmma_commit();
    pending.step(p, j);  // its REDs issue while the group runs
    dev::wgmma_wait<1>();
    if (prev >= 0 && lane == 0) {
      dev::mbar_arrive(r.empty(prev));
      dev::mbar_arrive(r.a_empty(aprev, wg));
    }
    if (threadIdx.x == 0) prod.issue(p, r.base, r.bars, items, row_blocks);
    __syncwarp();  // the warp reconverges before the next aligned wgmma
    prev = st, aprev = ast;
    if (++st == kSsStages) st = 0, phase ^= 1;
    if (++ast == kAStages) ast = 0, aphase ^= 1;
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc[0]);
  dev::fence_accumulators(acc[1]);
  if (prev >= 0 && lane == 0) {
    dev::mbar_arrive(r.empty(prev));
    dev::mbar_arrive(r.a_empty(aprev, wg));
  }
}

// kDefer: down's staged steps (DeferredAdd<kDefer>), 0 = atomics after each item.
template <bool kGateUp, bool kBig, int kDefer>
__global__ void __launch_bounds__(kSsThreads, 1) moe_ws_ss_kernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) uint8_t smem[];
  Rings r;
  r.base = dev::smem_addr(smem);
  r.abase = r.base + kSsStages * kStageBytes;
  const uint32_t staging = r.abase + kAStages * kAStageBytes;
  r.bars = staging + (kGateUp ? 2 * kStagingBytes : kDefer * kThreads * 16);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kSsStages; ++st) {
      dev::mbar_init(r.full(st), 1);
      dev::mbar_init(r.empty(st), kConsumerWarps);
    }
    for (int st = 0; st < kAStages; ++st) {
      for (int q = 0; q < 4; ++q) dev::mbar_init(r.a_full(st, q), 32);
      for (int wg = 0; wg < 2; ++wg) dev::mbar_init(r.a_empty(st, wg), 4);
    }
    dev::fence_mbar_init();
  }
  if constexpr (kGateUp) zero_out_for_down(p, threadIdx.x, kSsThreads);
  __syncthreads();
  const int row_blocks = p.N / kItemRows;
  const int items = *p.s.num_tiles * row_blocks;
  // Registers: 168 per thread at launch (384 threads); the dequant warps
  // need ~100 (a tile's 64 A registers), the MMA warps 128 accumulators, the
  // copy cursor and down's deferred adds (spills at 168).
  if (threadIdx.x >= kThreads) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kDequantRegs));
    dequant_tiles<kBig>(p, r, items, row_blocks);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kSsMmaRegs));
  const int wg = threadIdx.x >> 7;
  Producer<kSsStages> prod;
  if (threadIdx.x == 0) {
    prod.init(p, items, row_blocks);
    for (int i = 0; i < kLead; ++i) prod.issue(p, r.base, r.bars, items, row_blocks);
  }
  std::conditional_t<kDefer != 0, DeferredAdd<kDefer>, NoPending> pending;
  if constexpr (kDefer != 0) pending.slots = staging + threadIdx.x * 16;
  int st = 0, ast = 0;
  uint32_t phase = 0, aphase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const Item it = item_at(p.s, item, row_blocks);
    float acc[2][64];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[m][i] = 0.f;
    if (it.count > 64) consume_item_ss<2>(p, r, wg, items, row_blocks, st, phase, ast, aphase, prod, pending, acc);
    else consume_item_ss<1>(p, r, wg, items, row_blocks, st, phase, ast, aphase, prod, pending, acc);
    if constexpr (kGateUp) {
      store_h(p, it, wg, staging + wg * kStagingBytes, acc);
    } else if constexpr (kDefer != 0) {
      pending.finish(p, p.K / kTileK);  // steps the K loop had no tile for
      pending.stage(p, it, wg, acc);
    } else {
      add_out(p, it, wg, acc);
    }
  }
  if constexpr (kDefer != 0) pending.finish(p, 0);
}

template <bool kGateUp, bool kBig, int kDefer>
void launch_ss(const Params& p, int ctas, cudaStream_t stream) {
  constexpr int kSmem = ss_smem_bytes(kGateUp, kDefer);
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_ws_ss_kernel<kGateUp, kBig, kDefer>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  });
  moe_ws_ss_kernel<kGateUp, kBig, kDefer><<<unsigned(ctas), kSsThreads, kSmem, stream>>>(p);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_gate_up_ss(const Params& p, bool big, int ctas, cudaStream_t stream) {
  // Its MMA loop reads 64- and 128-row B boxes only (Producer follows fine_boxes).
  MX_CHECK(!p.fine_boxes, "fused_moe_decode: 48-row B boxes asked of the SS kernel");
  if (big) launch_ss<true, true, 0>(p, ctas, stream);
  else launch_ss<true, false, 0>(p, ctas, stream);
}

void launch_down_ss(const Params& p, bool big, int down_epilogue, int ctas, cudaStream_t stream) {
  MX_CHECK(!p.fine_boxes, "fused_moe_decode: 48-row B boxes asked of the SS kernel");
  if (down_epilogue == 1) {
    if (big) launch_ss<false, true, 0>(p, ctas, stream);
    else launch_ss<false, false, 0>(p, ctas, stream);
  } else if (big) {
    launch_ss<false, true, kSsDeferSteps>(p, ctas, stream);
  } else {
    launch_ss<false, false, kSsDeferSteps>(p, ctas, stream);
  }
}

}  // namespace mx::cuda::ws
