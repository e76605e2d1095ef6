// Prefill path of the fused MoE on Hopper's warpgroup MMA (wgmma, sm_90a),
// MoeConfig::path 4: gate_up on wgmma with wide pair tiles, down on the
// mma.sync tiles of fused_moe_prefill.cu. The warp-specialized path 5
// (fused_moe_ws.cu) replaced it in the auto rule (W4A4 included); it stays
// selectable (MoeConfig::path 4, --moe-kernel prefill-wgmma) for comparison.
//   * Wide tiles: after the router cut each expert's pairs into tiles of 64,
//     dev::moe_tile_map_kernel rewrites the tile map into tiles of up to 256 pairs
//     (Kimi at 8192 tokens: ~170 pairs per expert, so mostly one tile each).
//     gate_up runs one CTA = 2 warpgroups = 128 weight rows (8 strips of 16,
//     one per warp) x one wide tile, K in tiles of 64, one CTA per SM (128
//     FP32 accumulators per thread). Each dequantized weight element feeds up
//     to 256 pairs instead of 64: the in-register dequant per MMA drops ~3x.
//   * A (weights) comes from registers: each warp dequantizes its strip's
//     fragment exactly as for mma.m16n8k16 (the wgmma A-register layout per
//     warp is the same), streamed through a per-warp cp.async ring.
//   * B (the tile's activation rows) is copied with cp.async into shared
//     memory in the canonical K-major layout without swizzle ([K chunk of 8]
//     [pair][16 B], chunk stride 256 * 16 B) and read through a descriptor.
//     Lanes l and l + 16 copy the two 16-byte halves of one 32-byte sector of
//     a row (a warp: 16 rows x 2 chunks), so global reads use whole sectors
//     and the shared-memory writes are conflict-free. (One row per thread,
//     16 bytes per sector, drove L2 to 89% busy at 8192 tokens.)
//     The MMA width n is the tile's pair count rounded up to 64 (one of four
//     instantiations of the K loop), so a 170-pair tile runs n = 192.
//   * Pipelining: B and weight stages are kStages deep (all of shared
//     memory), copies run kDist tiles ahead; the A registers are
//     double-buffered so the dequant of tile i overlaps the wgmma of tile
//     i - 1 (wait_group 1, not 0).
//   * down: the same kernel on wide tiles split in halves of 128 pairs (two
//     CTAs per SM) ran 8.21 ms at 8192 tokens against 7.44 ms for the
//     mma.sync tiles (3 CTAs per SM hide the atomics epilogue and the short
//     K = 2048 loop's prologue), so down uses those: the map is cut back into
//     64-pair tiles after gate_up and h is written in natural column order.
// The weight layout permutes K inside each 64-tile (host/mxfp4_bits.h), so
// the activations must be in the same logical order for wgmma's B: x is
// permuted once per call (permute_kernel).
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/per_device_once.h"
#include "cuda/moe_tiles.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_internal.h"
#include "cuda/wgmma_rs.cuh"

namespace mx::cuda {

namespace {

constexpr int kWgWarps = 8, kWgThreads = kWgWarps * 32;
constexpr int kWgRows = kWgWarps * kStripRows;  // 128
constexpr int kPairs = dev::kMoeWideTilePairs;   // 256
constexpr int kStages = 6, kDist = 4;  // copies run kDist tiles ahead; kDist <= kStages - 2
constexpr int kWarpRing = dev::kRingCodeBytes + dev::kRingScaleBytes;  // 640
constexpr int kChunkBytes = kPairs * 16;    // one 8-wide K chunk of all rows: 4096
constexpr int kActStage = 8 * kChunkBytes;  // a 64-wide K tile: 32768
constexpr int kSmem = kStages * (kActStage + kWgWarps * kWarpRing);  // 227328
constexpr int kRowGroups = kPairs / kWgWarps / 16;  // 16-row copy groups per warp: 2

// xp = x with each 64-wide K tile in logical order; pairs of columns stay
// together, so one thread moves 4 bytes.
__global__ void permute_kernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ xp,
                               int64_t words, int K) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= words) return;
  const int64_t row = i / (K / 2);
  const int r = int(i % (K / 2)) * 2;
  xp[(row * K + (r & ~63) + mma_logical_col(r & 63)) / 2] = x[i];
}

__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  // K-major, no swizzle: leading (K) byte offset between core matrices
  // kChunkBytes, stride (N) byte offset between 8-row groups 128.
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(kChunkBytes >> 4) << 16) |
         (uint64_t(128 >> 4) << 32);
}

// acc (first 32 * NB floats) += W[strip rows, K] * act^T for this warp's strip
// (rows 16 * (warp % 4) of its warpgroup's 64) and the tile's first 64 * NB
// pair rows. rows[rb] is the row of pair warp * (kPairs / 8) + 16 rb + lane % 16
// (null past the tile's count: those smem rows keep stale data, which only
// reaches discarded accumulator columns).
template <int NB, bool kBig>
__device__ __forceinline__ void wide_tile_loop(const uint8_t* __restrict__ codes,
                                               const uint8_t* __restrict__ scales, int KT,
                                               const uint16_t* const (&rows)[kRowGroups],
                                               uint8_t* smem, float (&acc)[kPairs / 2]) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t act0 = dev::smem_addr(smem);
  const uint32_t ring = act0 + kStages * kActStage + warp * kStages * kWarpRing;
  const uint8_t* wsrc = codes + lane * 16;
  const uint8_t* ssrc = scales + (t >> 1) * 16 + (g >> 1) * 4;
  // This thread's smem offset for copy group rb, chunk pair cq: chunk 2 cq + lane / 16.
  const uint32_t copy0 = (lane >> 4) * kChunkBytes + (warp * (kPairs / kWgWarps) + (lane & 15)) * 16;
  auto issue = [&](int j, int st) {
#pragma unroll
    for (int rb = 0; rb < kRowGroups; ++rb) {
      if (!rows[rb]) continue;
      const uint32_t dst = act0 + st * kActStage + copy0 + rb * 16 * 16;
      const uint16_t* src = rows[rb] + size_t(j) * kTileK + (lane >> 4) * 8;
#pragma unroll
      for (int cq = 0; cq < 4; ++cq) dev::cp_async_16(dst + 2 * cq * kChunkBytes, src + 16 * cq);
    }
    dev::cp_async_16(ring + st * kWarpRing + lane * 16, wsrc + size_t(j) * kTileCodeBytes);
    dev::cp_async_4(ring + st * kWarpRing + dev::kRingCodeBytes + lane * 4,
                    ssrc + size_t(j) * kTileScaleBytes);
  };
#pragma unroll
  for (int j = 0; j < kDist; ++j) {
    if (j < KT) issue(j, j);
    dev::cp_async_commit();
  }
  // One K tile: wait for its copies, start the copies kDist tiles ahead,
  // dequantize into `a` (free: its last reader, tile i - 2, was retired by the
  // wait at the end of tile i - 1) and issue the four k16 steps.
  auto step = [&](int i, int st, uint32_t (&a)[4][4]) {
    dev::cp_async_wait<kDist - 1>();
    // The copies are generic-proxy writes that wgmma reads through the async proxy.
    dev::fence_proxy_async();
    // Also: every warpgroup has retired tile i - 2, whose stage is refilled now.
    __syncthreads();
    if (i + kDist < KT) issue(i + kDist, st + kDist < kStages ? st + kDist : st + kDist - kStages);
    dev::cp_async_commit();
    const uint4 w = dev::lds128(ring + st * kWarpRing + lane * 16);
    const uint32_t sw = dev::lds32(ring + st * kWarpRing + dev::kRingCodeBytes + lane * 4);
    const dev::ScaleMul m = dev::scale_multipliers<kBig>((g & 1) ? (sw >> 16) : (sw & 0xFFFFu));
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(w, kk), m, a[kk]);
    dev::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      dev::wgmma_rs_bf16<NB>(acc, a[kk],
                             smem_desc(act0 + st * kActStage + kk * 2 * kChunkBytes));
    dev::wgmma_commit();
    dev::wgmma_wait<1>();
  };
  uint32_t a0[4][4], a1[4][4];
  int st = 0;
  for (int i = 0; i < KT; i += 2) {  // KT is even (checked by the launcher)
    step(i, st, a0);
    st = st + 1 == kStages ? 0 : st + 1;
    step(i + 1, st, a1);
    st = st + 1 == kStages ? 0 : st + 1;
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc);
  dev::cp_async_wait<0>();
}

// gate_up of wide tile blockIdx.y and rows [128 blockIdx.x, +128): A = the
// expert's gate_up strips, act = permuted x (row = token); writes h =
// SiLU(gate) * up (BF16, row = pair, natural column order for the mma.sync
// down kernel) and zeroes out.
template <bool kBig>
__global__ void __launch_bounds__(kWgThreads, 1)
    moe_wide_gate_up_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                            const uint16_t* __restrict__ xp, int H, int I, int topk, MoeScratch s,
                            float* __restrict__ out, int64_t out_elems) {
  extern __shared__ uint4 dyn_smem[];
  {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  __shared__ int s_pair[kPairs];
  int e, cnt;
  if (!dev::load_wide_tile_pairs(s, blockIdx.y, 0, kPairs, s_pair, e, cnt)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int KT = H / kTileK;
  const int strip = blockIdx.x * kWgWarps + warp;  // within the expert's 2I / 16
  const size_t tile0 = (size_t(e) * (2 * I / kStripRows) + strip) * KT;
  const uint16_t* rows[kRowGroups];
#pragma unroll
  for (int rb = 0; rb < kRowGroups; ++rb) {
    const int pair = s_pair[warp * (kPairs / kWgWarps) + 16 * rb + (lane & 15)];
    rows[rb] = pair < 0 ? nullptr : xp + size_t(pair / topk) * H;
  }
  float acc[kPairs / 2];
#pragma unroll
  for (int i = 0; i < kPairs / 2; ++i) acc[i] = 0.f;
  const uint8_t* c0 = codes + tile0 * kTileCodeBytes;
  const uint8_t* s0 = scales + tile0 * kTileScaleBytes;
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  switch ((cnt + 63) / 64) {  // uniform over the CTA
    case 1: wide_tile_loop<1, kBig>(c0, s0, KT, rows, smem, acc); break;
    case 2: wide_tile_loop<2, kBig>(c0, s0, KT, rows, smem, acc); break;
    case 3: wide_tile_loop<3, kBig>(c0, s0, KT, rows, smem, acc); break;
    default: wide_tile_loop<4, kBig>(c0, s0, KT, rows, smem, acc); break;
  }
  // acc[4 nb + c]: strip row g + 8 (c >> 1), tile row (pair) nb * 8 + 2t + (c & 1).
  // Strip rows g are gate rows strip * 8 + g, rows g + 8 the matching up rows.
#pragma unroll
  for (int nb = 0; nb < kPairs / 8; ++nb) {
    if (nb * 8 >= cnt) break;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int pair = s_pair[nb * 8 + 2 * t + j];
      if (pair < 0) continue;
      const float gate = acc[4 * nb + j], up = acc[4 * nb + 2 + j];
      const float silu = gate / (1.f + __expf(-gate));
      s.h[size_t(pair) * I + strip * 8 + g] = dev::float_to_bf16_bits(silu * up);
    }
  }
}

template <bool kBig>
void launch_gate_up(const MoeWeights& w, const uint16_t* xp, int T, int topk, float* out,
                    const MoeScratch& s, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_wide_gate_up_kernel<kBig>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  });
  const int H = w.hidden, I = w.intermediate;
  const unsigned tiles = unsigned(dev::moe_max_wide_tiles(T * topk, w.experts));
  moe_wide_gate_up_kernel<kBig><<<dim3(unsigned(2 * I / kWgRows), tiles), kWgThreads, kSmem, stream>>>(
      w.w13_codes, w.w13_scales, xp, H, I, topk, s, out, int64_t(T) * H);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_moe_prefill_wgmma(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                              const float* topk_weights, float* out, const MoeScratch& s,
                              cudaStream_t stream) {
  const int H = w.hidden, I = w.intermediate;
  if ((2 * I) % kWgRows || H % kWgRows)
    fail_input("fused_moe_decode: the wgmma path needs 2I and H multiples of {}", kWgRows);
  // The K loop runs tiles in pairs (double-buffered A registers).
  if ((H / kTileK) % 2)
    fail_input("fused_moe_decode: the wgmma path needs H a multiple of {}", 2 * kTileK);
  if (w.experts > dev::kMoeMapThreads)
    fail_input("fused_moe_decode: the wgmma path takes up to {} experts", dev::kMoeMapThreads);
  const int64_t words = int64_t(T) * H / 2;
  permute_kernel<<<unsigned((words + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(x), reinterpret_cast<uint32_t*>(xp), words, H);
  MX_CUDA_CHECK(cudaGetLastError());
  dev::moe_tile_map_kernel<kPairs><<<1, dev::kMoeMapThreads, 0, stream>>>(s, w.experts);
  MX_CUDA_CHECK(cudaGetLastError());
  if (w.big_scales) launch_gate_up<true>(w, xp, T, topk, out, s, stream);
  else launch_gate_up<false>(w, xp, T, topk, out, s, stream);
  // Back to the router's 64-pair tiles for the mma.sync down kernel.
  dev::moe_tile_map_kernel<dev::kMoeTilePairs><<<1, dev::kMoeMapThreads, 0, stream>>>(s, w.experts);
  MX_CUDA_CHECK(cudaGetLastError());
  launch_moe_prefill_down(w, T, topk, topk_weights, out, s, stream);
}

}  // namespace mx::cuda
