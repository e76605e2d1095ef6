// W4A4 MoE prefill on FP8 wgmma (w4a4_fp8.h, docs/w4a4-fp8.md), the
// structure of fused_moe_wgmma.cu's gate_up with E4M3 operands:
//   * A (weights, MXFP4 kernel layout, unchanged) is converted in registers:
//     per 64-wide K tile a lane's scale pair gives d = s - smax_row for its
//     rows g and g + 8, an 8-byte E4M3 table per row (host/fp8_fold.h), and
//     each layout word becomes two E4M3x4 registers with three PRMTs and
//     a few logic ops (fold_word). smax_row (the row's largest block scale)
//     is computed by each warp for its strip before the K loop.
//   * B (activations, already folded to E4M3 by the quantizer, in the FP8
//     MMA's K order) is copied with cp.async into shared memory, K-major
//     without swizzle, 64 bytes per pair and K tile (half of BF16's), so
//     twice as many stages fit.
//   * wgmma m64nNk32 E4M3 (two per K tile); the tensor cores' FP8 sums are
//     promoted into FP32 accumulators every 2 or 4 K tiles (fp8_tile_loop);
//     the epilogue multiplies by 2^(smax_w - 133) * 2^(smax_x - 133) (c = 6).
//   * Wide tiles of up to 192 pairs of one expert, found by each CTA from the
//     router's per-expert offsets (no tile-map launch), for gate_up and down
//     alike; one CTA (2 warpgroups, 128 rows) per SM.
// gate_up writes h = SiLU(gate) * up in BF16, which is quantized in place
// (the contract quantizes down's input too) before down.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/per_device_once.h"
#include "cuda/w4a4_fp8.h"
#include "cuda/w4a4_fp8_device.cuh"
#include "cuda/w4a4_fp8_wgmma.cuh"
#include "cuda/wgmma_rs.cuh"

namespace mx::cuda {

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRows = kWarps * kStripRows;       // 128 weight rows per CTA
// Pairs per wide tile: 192, not 256, because the FP32 promotion below needs a
// second accumulator array (2 x 96 floats per thread).
constexpr int kPairs = 192;
constexpr int kStages = 12, kDist = 10;          // copies run kDist tiles ahead; kDist <= kStages - 2
constexpr int kWarpRing = dev::kRingCodeBytes + dev::kRingScaleBytes;  // 640
constexpr int kChunkBytes = kPairs * 16;    // one 16-wide K chunk of all pair rows: 3072
constexpr int kActStage = 4 * kChunkBytes;  // a 64-wide K tile: 12288
constexpr int kSmem = kStages * (kActStage + kWarps * kWarpRing);  // 208896
// A K tile's copy: 12 groups of 16 pair rows x 2 sectors of 32 bytes = 24
// warp copies, 3 per warp (lanes l and l + 16 copy the two 16-byte chunks of
// one sector of row l % 16).
constexpr int kCopyItems = kPairs / 16 * 2 / kWarps;  // 3
constexpr int kFp8TileBytes = kTileK;                 // bytes of one pair row per K tile
constexpr int kMaxExperts = 1024;                     // the router's limit too

__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  // K-major, no swizzle: leading (K) byte offset between core matrices
  // kChunkBytes, stride (N) byte offset between 8-row groups 128.
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(kChunkBytes >> 4) << 16) |
         (uint64_t(128 >> 4) << 32);
}

// Wide tile y of the expert-sorted pairs: experts in order, each cut into
// tiles of kPairs. The CTA copies the E + 1 offsets into s_off at once (one
// memory latency instead of one per 32 experts), then warp 0 walks them 32
// experts at a time. False (uniformly) past the last tile. Fills s_pair (-1 =
// padding) and ends with a barrier.
__device__ bool find_wide_tile(const MoeScratch& s, int E, int y, int* s_off, int* s_pair,
                               int* s_meta, int& expert, int& count) {
  for (int i = threadIdx.x; i <= E; i += blockDim.x) s_off[i] = s.offsets[i];
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int before = 0, found = -1, start = 0, cnt = 0;
    for (int base = 0; base < E && found < 0; base += 32) {
      const int e = base + lane;
      const int beg = e < E ? s_off[e] : 0, n_pairs = e < E ? s_off[e + 1] - beg : 0;
      const int n = (n_pairs + kPairs - 1) / kPairs;
      int incl = n;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
      }
      const int first = before + incl - n;
      const unsigned hit = __ballot_sync(0xffffffffu, n > 0 && y >= first && y < first + n);
      if (hit) {
        const int src = __ffs(hit) - 1;
        const int j = y - first;  // valid in lane src
        const int st = beg + kPairs * j, c = min(kPairs, n_pairs - kPairs * j);
        found = __shfl_sync(0xffffffffu, e, src);
        start = __shfl_sync(0xffffffffu, st, src);
        cnt = __shfl_sync(0xffffffffu, c, src);
      }
      before += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) {
      s_meta[0] = found;
      s_meta[1] = start;
      s_meta[2] = cnt;
    }
  }
  __syncthreads();
  expert = s_meta[0];
  count = s_meta[2];
  if (expert < 0) return false;
  for (int i = threadIdx.x; i < kPairs; i += blockDim.x)
    s_pair[i] = i < count ? s.sorted_pairs[s_meta[1] + i] : -1;
  __syncthreads();
  return true;
}

// Largest block scale of this lane's rows g and g + 8 over the strip's KT
// tiles (scale bytes b*16 + 2g + h of each 32-byte tile, host/mxfp4_bits.h).
__device__ __forceinline__ void strip_row_max(const uint8_t* __restrict__ scales, int KT,
                                              int& smax_g, int& smax_g8) {
  const int lane = threadIdx.x & 31, g = lane >> 2;
  uint32_t m[4] = {0, 0, 0, 0};
  for (int j = lane; j < KT; j += 32) {
    const uint4* p = reinterpret_cast<const uint4*>(scales + size_t(j) * kTileScaleBytes);
    const uint4 a = __ldg(p), b = __ldg(p + 1);
    m[0] = __vmaxu4(m[0], __vmaxu4(a.x, b.x));
    m[1] = __vmaxu4(m[1], __vmaxu4(a.y, b.y));
    m[2] = __vmaxu4(m[2], __vmaxu4(a.z, b.z));
    m[3] = __vmaxu4(m[3], __vmaxu4(a.w, b.w));
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) m[i] = __vmaxu4(m[i], __shfl_xor_sync(0xffffffffu, m[i], d));
  const int q = g >> 1;
  const uint32_t word = q == 0 ? m[0] : q == 1 ? m[1] : q == 2 ? m[2] : m[3];
  const uint32_t pair = word >> (16 * (g & 1));  // byte 2g: row g, 2g + 1: row g + 8
  smax_g = int(pair & 0xFF);
  smax_g8 = int((pair >> 8) & 0xFF);
}

// Copy item i of this warp: 16-row group and sector (cq) of a K tile.
__device__ __forceinline__ int copy_group(int warp, int i) { return (warp * kCopyItems + i) >> 1; }
__device__ __forceinline__ int copy_sector(int warp, int i) { return (warp * kCopyItems + i) & 1; }

// acc (first 32 * NB floats) += folded W[strip rows, K] * act^T for this
// warp's strip and the tile's first 64 * NB pair rows; rows[i] is the E4M3
// row of pair 16 copy_group(warp, i) + lane % 16 (null past the tile's count:
// those smem rows keep stale data that reaches only discarded columns).
// FP8 wgmma accumulates with truncation to about 14 bits (measured: 1.6e-2
// relative error against an FP32 sum at Kimi's K without promotion), so the
// MMAs accumulate into `part` for kPromote K tiles at a time, restarted with
// scale-d = 0, and part is added to acc in FP32.
template <int NB, int kPromote>
__device__ __forceinline__ void fp8_tile_loop(const uint8_t* __restrict__ codes,
                                              const uint8_t* __restrict__ scales, int KT,
                                              const uint8_t* const (&rows)[kCopyItems],
                                              uint8_t* smem, int& smax_g, int& smax_g8,
                                              float (&acc)[kPairs / 2]) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t act0 = dev::smem_addr(smem);
  const uint32_t ring = act0 + kStages * kActStage + warp * kStages * kWarpRing;
  const uint8_t* wsrc = codes + lane * 16;
  const uint8_t* ssrc = scales + (t >> 1) * 16 + (g >> 1) * 4;
  auto issue = [&](int j, int st) {
#pragma unroll
    for (int i = 0; i < kCopyItems; ++i) {
      if (!rows[i]) continue;
      const int chunk = 2 * copy_sector(warp, i) + (lane >> 4);
      const uint32_t dst = act0 + st * kActStage + chunk * kChunkBytes +
                           (16 * copy_group(warp, i) + (lane & 15)) * 16;
      dev::cp_async_16(dst, rows[i] + size_t(j) * kFp8TileBytes + chunk * 16);
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
  // The rows' largest scales, read while the first copies are in flight.
  strip_row_max(scales, KT, smax_g, smax_g8);
  float part[32 * NB];  // the tensor cores' sum since the last promotion
  // One K tile: wait for its copies, start the copies kDist tiles ahead,
  // convert into `a` (free: its last reader, tile i - 2, was retired by the
  // wait at the end of tile i - 1) and issue the two k32 steps.
  // u = the tile's place in its promotion interval (a compile-time constant
  // after unrolling: 0 restarts `part`, kPromote - 1 adds it to acc).
  auto step = [&](int i, int u, int st, uint32_t (&a)[2][4]) {
    dev::cp_async_wait<kDist - 1>();
    dev::fence_proxy_async();
    __syncthreads();  // also: every warpgroup has retired tile i - 2, whose stage is refilled now
    if (i + kDist < KT) issue(i + kDist, st + kDist < kStages ? st + kDist : st + kDist - kStages);
    dev::cp_async_commit();
    const uint4 w = dev::lds128(ring + st * kWarpRing + lane * 16);
    const uint32_t sw = dev::lds32(ring + st * kWarpRing + dev::kRingCodeBytes + lane * 4);
    const uint32_t sc = (g & 1) ? (sw >> 16) : (sw & 0xFFFFu);
    uint32_t glo, ghi, hlo, hhi;
    dev::fp8_fold_table(int(sc & 0xFF) - smax_g, glo, ghi);
    dev::fp8_fold_table(int(sc >> 8) - smax_g8, hlo, hhi);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      fold_word(dev::word_of(w, 2 * s), glo, ghi, hlo, hhi, a[s][0], a[s][1]);
      fold_word(dev::word_of(w, 2 * s + 1), glo, ghi, hlo, hhi, a[s][2], a[s][3]);
    }
    dev::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 2; ++s)
      dev::wgmma_rs_e4m3<NB>(part, a[s], smem_desc(act0 + st * kActStage + s * 2 * kChunkBytes),
                             s > 0 || u != 0);
    dev::wgmma_commit();
    if (u == kPromote - 1) {
      dev::wgmma_wait<0>();
      dev::fence_accumulators(part);
#pragma unroll
      for (int c = 0; c < 32 * NB; ++c) acc[c] += part[c];
    } else {
      dev::wgmma_wait<1>();
    }
  };
  uint32_t a0[2][4], a1[2][4];
  int st = 0;
  for (int i = 0; i < KT; i += kPromote) {  // KT % kPromote == 0 (checked by the launcher)
#pragma unroll
    for (int u = 0; u < kPromote; ++u) {
      step(i + u, u, st, (u & 1) ? a1 : a0);
      st = st + 1 == kStages ? 0 : st + 1;
    }
  }
  dev::cp_async_wait<0>();  // (the last tile's promotion waited for the MMAs)
}

struct Fp8MoeArgs {
  const uint8_t* codes;   // expert 0's weight, kernel layout
  const uint8_t* scales;
  const uint8_t* act;     // E4M3 rows (row stride act_stride bytes, smax at byte K)
  int64_t act_stride;
  int K, rows_per_expert;  // the weight is [rows_per_expert, K] per expert
  int E, H, I, topk;
  const float* topk_weights;  // down only
  float* out;
  int64_t out_elems;          // gate_up zeroes out for down
};

// kDown = false: gate_up of wide tile blockIdx.y, rows [128 blockIdx.x, +128)
// of the expert's interleaved gate/up weight, act row = token; writes h.
// kDown = true: down, act row = pair; out[token] += weight * y.
template <bool kDown, int kPromote>
__global__ void __launch_bounds__(kThreads, 1) fp8_moe_kernel(Fp8MoeArgs p, MoeScratch s) {
  extern __shared__ uint4 dyn_smem[];
  if constexpr (!kDown) {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < p.out_elems; i += stride) p.out[i] = 0.f;
  }
  __shared__ int s_pair[kPairs], s_meta[3], s_off[kMaxExperts + 1];
  // Per pair: the activation row's unscale factor, and (down) its routing
  // weight times that factor, loaded once instead of in the epilogue loop
  // (where each load would sit between atomics).
  __shared__ float s_fx[kPairs];
  int e, cnt;
  if (!find_wide_tile(s, p.E, blockIdx.y, s_off, s_pair, s_meta, e, cnt)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  auto act_row = [&](int pair) {
    return p.act + (kDown ? size_t(pair) : size_t(pair / p.topk)) * size_t(p.act_stride);
  };
  for (int i = tid; i < kPairs; i += kThreads)
    s_fx[i] = i < cnt ? fold_unscale(act_row(s_pair[i])[p.K]) *
                            (kDown ? p.topk_weights[s_pair[i]] : 1.f)
                      : 0.f;
  const int KT = p.K / kTileK;
  const int strip = blockIdx.x * kWarps + warp;  // within the expert's rows / 16
  const size_t tile0 = (size_t(e) * (p.rows_per_expert / kStripRows) + strip) * KT;
  const uint8_t* c0 = p.codes + tile0 * kTileCodeBytes;
  const uint8_t* sc0 = p.scales + tile0 * kTileScaleBytes;
  int smax_g = 0, smax_g8 = 0;  // set by fp8_tile_loop
  const uint8_t* rows[kCopyItems];
#pragma unroll
  for (int i = 0; i < kCopyItems; ++i) {
    const int pair = s_pair[16 * copy_group(warp, i) + (lane & 15)];
    rows[i] = pair < 0 ? nullptr : act_row(pair);
  }
  float acc[kPairs / 2];
#pragma unroll
  for (int i = 0; i < kPairs / 2; ++i) acc[i] = 0.f;
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  switch ((cnt + 63) / 64) {  // uniform over the CTA
    case 1: fp8_tile_loop<1, kPromote>(c0, sc0, KT, rows, smem, smax_g, smax_g8, acc); break;
    case 2: fp8_tile_loop<2, kPromote>(c0, sc0, KT, rows, smem, smax_g, smax_g8, acc); break;
    default: fp8_tile_loop<3, kPromote>(c0, sc0, KT, rows, smem, smax_g, smax_g8, acc); break;
  }
  const float fw_g = fold_unscale(smax_g), fw_g8 = fold_unscale(smax_g8);
  // acc[4 nb + c]: strip row g + 8 (c >> 1), tile pair nb * 8 + 2t + (c & 1).
#pragma unroll
  for (int nb = 0; nb < kPairs / 8; ++nb) {
    if (nb * 8 >= cnt) break;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = nb * 8 + 2 * t + j, pair = s_pair[idx];
      if (pair < 0) continue;
      const float fx = s_fx[idx];
      const float lo = acc[4 * nb + j] * fw_g * fx, hi = acc[4 * nb + 2 + j] * fw_g8 * fx;
      if constexpr (!kDown) {
        // Strip rows g are gate rows strip * 8 + g, rows g + 8 the matching up rows.
        const float silu = lo / (1.f + __expf(-lo));
        s.h[size_t(pair) * p.I + strip * 8 + g] = dev::float_to_bf16_bits(silu * hi);
      } else {
        float* o = p.out + size_t(pair / p.topk) * p.H + strip * kStripRows + g;
        atomicAdd(o, lo);  // fx includes the routing weight
        atomicAdd(o + 8, hi);
      }
    }
  }
}

template <bool kDown, int kPromote>
void launch_fp8(const Fp8MoeArgs& a, const MoeScratch& s, int pairs, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(fp8_moe_kernel<kDown, kPromote>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  });
  const unsigned tiles = unsigned(pairs / kPairs + a.E + 1);  // sum over experts of ceil(n / kPairs)
  fp8_moe_kernel<kDown, kPromote>
      <<<dim3(unsigned(a.rows_per_expert / kRows), tiles), kThreads, kSmem, stream>>>(a, s);
  MX_CUDA_CHECK(cudaGetLastError());
}

template <int kPromote>
void run_fp8(const MoeWeights& w, const uint16_t* x, int T, int topk, const float* topk_weights,
             float* out, const MoeScratch& s, cudaStream_t stream) {
  const int H = w.hidden, I = w.intermediate, pairs = T * topk;
  // x -> E4M3 rows in s.xp (2H bytes per token: H codes, then the row's smax byte).
  uint8_t* xq = reinterpret_cast<uint8_t*>(s.xp);
  w4a4_fp8_quantize_rows(x, T, H, xq, 2 * int64_t(H), nullptr, stream);
  Fp8MoeArgs a{w.w13_codes, w.w13_scales, xq, 2 * int64_t(H), H, 2 * I, w.experts, H, I, topk,
               topk_weights, out, int64_t(T) * H};
  launch_fp8<false, kPromote>(a, s, pairs, stream);
  // h (BF16 [pairs, I]) -> E4M3 in place: 2I bytes per pair row.
  uint8_t* hq = reinterpret_cast<uint8_t*>(s.h);
  w4a4_fp8_quantize_rows(s.h, pairs, I, hq, 2 * int64_t(I), nullptr, stream);
  a.codes = w.w2_codes;
  a.scales = w.w2_scales;
  a.act = hq;
  a.act_stride = 2 * int64_t(I);
  a.K = I;
  a.rows_per_expert = H;
  launch_fp8<true, kPromote>(a, s, pairs, stream);
}

}  // namespace

void launch_moe_prefill_fp8(const MoeWeights& w, const uint16_t* x, int T, int topk,
                            const float* topk_weights, float* out, const MoeScratch& s,
                            cudaStream_t stream, int promote_tiles) {
  const int H = w.hidden, I = w.intermediate;
  // K loops run whole promotion intervals of up to 4 tiles (256 along K).
  if (w.experts > kMaxExperts)
    fail_input("fused_moe_decode: the W4A4 FP8 path takes up to {} experts, got {}", kMaxExperts,
               w.experts);
  if (H % 256 || I % 256 || H > kFp8QuantMaxK || I > kFp8QuantMaxK)
    fail_input("fused_moe_decode: the W4A4 FP8 path needs H and I multiples of 256 up to {}, got "
               "H={} I={}", kFp8QuantMaxK, H, I);
  if (promote_tiles == 4) return run_fp8<4>(w, x, T, topk, topk_weights, out, s, stream);
  if (promote_tiles == 2) return run_fp8<2>(w, x, T, topk, topk_weights, out, s, stream);
  fail_input("fused_moe_decode: FP8 promotion every 2 or 4 K tiles, got {}", promote_tiles);
}

}  // namespace mx::cuda
