// The FP8 wgmma MLA decode kernel (heads <= 8, kFp8Wgmma): both products on
// Hopper's FP8 tensor-core path (wgmma, QGMMA in SASS), so no FP8 -> BF16
// decode runs on the integer pipes (what limits the fused kernel:
// docs/mla-decode.md, "what limits the FP8 path").
//
// One CTA = one warpgroup (128 threads) = one sequence x one KV split; two
// CTAs per SM. 64-token tiles flow through a two-stage cp.async pipeline;
// a stage is refilled (tile t + 2) as soon as its scores and value fragments
// are read, so up to two tiles per CTA are in flight.
//   scores:  S[64 tokens x 16] = K_tile[64 x 576] . Q^T, wgmma m64n16k32 E4M3
//            with both operands in shared memory. Q holds the 8 heads twice:
//            rows 0-7 = hi, rows 8-15 = lo, where q rounded to BF16 (as the
//            other kernels round it) times a per-head power of two is exactly
//            hi + lo in E4M3 (8 significant bits = 4 + 4); the two halves of
//            the accumulator add up to the BF16-q score. The 18 k-steps go
//            into groups of 4 with fresh accumulators added in F32 (FP8
//            wgmma keeps ~14 bits when it accumulates).
//   softmax: online, log2 domain. Each token's cache scale s_t enters twice:
//            the score is acc * 2^-e_h * s_t (max m, row sum l), and P' =
//            exp2(score + log2 s_t - m2_tile) against the tile's own maximum
//            of score + log2 s_t (brought to a running m2 in F32), so P' times
//            the raw E4M3 values is p * s_t * v up to exp2(m2 - m), applied
//            at the end, whatever the range of the scales.
//            P' * 256 goes to shared memory as E4M3 hi + lo (P^T, K-major).
//   values:  O^T[512 x 8] += V^T . P'^T with wgmma m64n8k32, A (V^T) from
//            registers: ldmatrix.trans of the stored rows gives a lane two
//            tokens x two dims in one register; one byte permute per 4 values
//            makes the A fragment, with the tokens in a permuted k order that
//            the P^T rows are written in. hi and lo are two wgmmas on the same
//            A registers; each tile's product lands in fresh accumulators
//            that are added to O in F32 after the rescale.
// Shared tiles use wgmma's 64-byte swizzle: 64-dim slabs of 64-byte rows,
// 16-byte chunk c of row r stored at chunk c ^ (r / 2) % 4.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/attention/mla_decode_common.cuh"
#include "cuda/wgmma_rs.cuh"

namespace mx::cuda::mla {
namespace {

namespace wg {
using wgmma_kernel::kHeads, wgmma_kernel::kTile;
constexpr int kThreads = 128;
constexpr int kStages = 2;
}  // namespace wg

constexpr int kSlab = wg::kTile * 64;          // one 64-dim slab of a stage: 4096 bytes
constexpr int kStageBytes = 9 * kSlab;         // 36,864
constexpr int kQSlab = 16 * 64;                // one 64-dim slab of Q (16 rows)
constexpr int kOffQ = wg::kStages * kStageBytes;
constexpr int kOffP = kOffQ + 9 * kQSlab;      // P^T: 16 rows (hi heads, lo heads) x 64 tokens
constexpr int kOffScale = kOffP + 16 * 64;     // F32 [stages][64]
constexpr int kOffQinv = kOffScale + wg::kStages * wg::kTile * 4;  // F32 [8]: 2^-e per head
constexpr int kOffRed = kOffQinv + 8 * 4;      // F32 [4 warps][8 heads][2]
constexpr int kUsed = kOffRed + 4 * 8 * 2 * 4;
// What is used plus 1 KB of slack to align the tiles to 1 KB, in whole KB (86,016).
constexpr int kBytes = (kUsed + 1024 + 1023) / 1024 * 1024;
static_assert(2 * (kBytes + 1024) <= 233472, "two CTAs must fit an SM's shared memory");

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a 64-byte-swizzled slab.
__device__ __forceinline__ uint32_t sw64(int row, int chunk) { return row * 64 + (((chunk ^ (row >> 1)) & 3) << 4); }

// wgmma shared-memory descriptor: K-major, 64-byte swizzle, 8-row groups 512 bytes apart.
__device__ __forceinline__ uint64_t desc64(uint32_t addr) {
  return uint64_t((addr >> 4) & 0x3FFF) | (uint64_t(1) << 16) | (uint64_t(512 >> 4) << 32) | (uint64_t(2) << 62);
}

using dev::fence_accumulators, dev::fence_proxy_async, dev::wgmma_commit, dev::wgmma_fence, dev::wgmma_wait;

// d (+)= A . B, m64n16k32, E4M3 x E4M3 -> F32, A and B in shared memory.
__device__ __forceinline__ void wgmma_ss_n16(float (&d)[8], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(accumulate));
}
// d (+)= A . B, m64n8k32, E4M3 x E4M3 -> F32, A in registers, B in shared memory.
__device__ __forceinline__ void wgmma_rs_n8(float (&d)[4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ uint32_t prmt2(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
// Two floats -> E4M3 x2 (x in the low byte), and back.
__device__ __forceinline__ uint32_t to_e4m3x2(float x, float y) {
  return __nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float2 from_e4m3x2(uint32_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v), __NV_E4M3);
  return make_float2(__half2float(__half(__half_raw{h.x})), __half2float(__half(__half_raw{h.y})));
}

// Cache slot of row `row` of tile `tile` (0 past the context).
__device__ __forceinline__ uint32_t row_slot(const Params& p, const int32_t* table, int ctx, int tile, int row) {
  return token_slot(p, table, ctx, tile * wg::kTile + row);
}
// The slots of this thread's four rows (16 ps + tid / 8) of tile `tile`.
__device__ __forceinline__ void tile_slots(const Params& p, const int32_t* table, int ctx, int tile, uint32_t (&slot)[4]) {
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) slot[ps] = row_slot(p, table, ctx, tile, 16 * ps + (threadIdx.x >> 3));
}

// Tile `tile` into the stage at `stage` (a shared address). Thread (r8 = tid / 8,
// sub = tid % 8) copies rows 16 ps + r8 (ps < 4): chunks sub + 8 j (j < 4;
// slab 2 j + sub / 4, chunk sub % 4 of the slab) and, for sub < 4, rope chunk
// 32 + sub (slab 8), so each warp instruction reads whole 128-byte lines of
// four rows. The swizzle of those rows depends on r8 only. Rows past the
// context are zero-filled.
__device__ __forceinline__ void load_tile(const Params& p, const uint32_t (&slot)[4], int ctx, int tile,
                                          uint32_t stage, uint32_t scale_dst) {
  const int r8 = threadIdx.x >> 3, sub = threadIdx.x & 7;
  const uint32_t lane_off = r8 * 64 + ((((sub & 3) ^ (r8 >> 1)) & 3) << 4) + (sub >> 2) * kSlab;
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    const int row = 16 * ps + r8;
    const bool valid = tile * wg::kTile + row < ctx;
    const uint8_t* src = valid ? p.kv + size_t(slot[ps]) * kRowFp8 + sub * 16 : p.kv;
    const uint32_t dst = stage + ps * 1024 + lane_off;
#pragma unroll
    for (int j = 0; j < 4; ++j) cp_async16(dst + 2 * j * kSlab, valid ? src + 128 * j : src, valid);
    if (sub < 4) cp_async16(dst + 8 * kSlab, valid ? src + 512 : src, valid);
    if (sub == 0) cp_async4(scale_dst + row * 4, valid ? p.k_scale + slot[ps] : p.k_scale, valid);
  }
}

__global__ void __launch_bounds__(wg::kThreads, 2) mla_decode_fp8_wgmma_kernel(const Params p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // wgmma's swizzle works on address bits: align the tiles to 1 KB.
  const uint32_t raw_addr = smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (base - raw_addr);
  const int split = blockIdx.x, b = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;
  const int ctx = p.context_lens[b];
  const int tiles = (ctx + wg::kTile - 1) / wg::kTile;
  const int per_split = (tiles + p.num_splits - 1) / p.num_splits;
  const int t_begin = min(tiles, split * per_split), t_end = min(tiles, t_begin + per_split);
  const int32_t* table = p.block_tables + size_t(b) * p.max_blocks;

  // Two tiles ahead: tile t + 2 goes into tile t's stage as soon as tile t's
  // scores and value fragments have been read (mid-tile), so each CTA keeps
  // up to two tiles in flight.
  uint32_t next_slot[4];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    if (t_begin + s < t_end) {
      tile_slots(p, table, ctx, t_begin + s, next_slot);
      load_tile(p, next_slot, ctx, t_begin + s, base + s * kStageBytes, base + kOffScale + s * wg::kTile * 4);
    }
    cp_async_commit();
  }
  if (t_begin + 2 < t_end) tile_slots(p, table, ctx, t_begin + 2, next_slot);

  // ---- q -> BF16(q * scale * log2 e) * 2^e_h = hi + lo, both E4M3 ----
  // Warp w converts heads 2w, 2w+1; a lane takes 4 dims at a time.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int h = 2 * warp + hh;
    const bool valid = h < p.heads;
    const float* qrow = p.q + (size_t(b) * p.heads + (valid ? h : 0)) * kMlaHeadDim;
    float v[5][4];
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 5; ++i) {
      const int grp = lane + 32 * i;  // 144 groups of 4 dims
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (valid && grp < 144) x = __ldg(reinterpret_cast<const float4*>(qrow + 4 * grp));
      v[i][0] = __bfloat162float(__float2bfloat16_rn(x.x * p.q_scale));
      v[i][1] = __bfloat162float(__float2bfloat16_rn(x.y * p.q_scale));
      v[i][2] = __bfloat162float(__float2bfloat16_rn(x.z * p.q_scale));
      v[i][3] = __bfloat162float(__float2bfloat16_rn(x.w * p.q_scale));
#pragma unroll
      for (int e = 0; e < 4; ++e) amax = fmaxf(amax, fabsf(v[i][e]));
    }
#pragma unroll
    for (int k = 1; k < 32; k <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, k));
    // amax * 2^e in [128, 256): E4M3 holds it (max 448), and hi + lo of every
    // element down to amax * 2^-10 is exact.
    const int e = amax > 0.f ? min(max(7 - (((__float_as_int(amax) >> 23) & 0xff) - 127), -120), 120) : 0;
    const float f = __int_as_float((127 + e) << 23);
    if (lane == 0) reinterpret_cast<float*>(smem + kOffQinv)[h] = __int_as_float((127 - e) << 23);
#pragma unroll
    for (int i = 0; i < 5; ++i) {
      const int grp = lane + 32 * i;
      if (grp >= 144) continue;
      const float x0 = v[i][0] * f, x1 = v[i][1] * f, x2 = v[i][2] * f, x3 = v[i][3] * f;
      const uint32_t h01 = to_e4m3x2(x0, x1), h23 = to_e4m3x2(x2, x3);
      const float2 b01 = from_e4m3x2(h01), b23 = from_e4m3x2(h23);
      const uint32_t l01 = to_e4m3x2(x0 - b01.x, x1 - b01.y), l23 = to_e4m3x2(x2 - b23.x, x3 - b23.y);
      const int d = 4 * grp, slab = d >> 6, chunk = (d >> 4) & 3, within = d & 15;
      *reinterpret_cast<uint32_t*>(smem + kOffQ + slab * kQSlab + sw64(h, chunk) + within) = h01 | (h23 << 16);
      *reinterpret_cast<uint32_t*>(smem + kOffQ + slab * kQSlab + sw64(8 + h, chunk) + within) = l01 | (l23 << 16);
    }
  }
  fence_proxy_async();
  __syncthreads();
  const float* qinv_s = reinterpret_cast<const float*>(smem + kOffQinv);
  const float qinv[2] = {qinv_s[2 * q4], qinv_s[2 * q4 + 1]};

  // ldmatrix.trans rows of the values: lane L reads token 8 (L / 8) + L % 8 of
  // a 32-token k-step; its swizzle depends on L % 8 only.
  const int v_row = 8 * (lane >> 3) + (lane & 7);
  const uint32_t v_lane = v_row * 64 + (((warp ^ (v_row >> 1)) & 3) << 4);
  // P^T word of this lane: head 2 q4 (g even) or 2 q4 + 1 (g odd), bytes k
  // 16 warp + 4 (g / 2) .. +3 (tokens 16 warp + g_even, g_odd, g_even + 8, g_odd + 8).
  const int p_head = 2 * q4 + (g & 1);
  const uint32_t p_hi = kOffP + sw64(p_head, warp) + 4 * (g >> 1);
  const uint32_t p_lo = kOffP + sw64(8 + p_head, warp) + 4 * (g >> 1);
  float* red = reinterpret_cast<float*>(smem + kOffRed);
  const float* scale_s = reinterpret_cast<const float*>(smem + kOffScale);

  float m_run[2] = {-INFINITY, -INFINITY}, m2_run[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};
  float o[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int st = (t - t_begin) & 1;
    cp_async_wait<1>();   // tile t landed (tile t + 1 may still be in flight)
    fence_proxy_async();  // the copies are read by wgmma (async proxy)
    __syncthreads();      // ... for every thread; P^T and `red` of tile t-1 are consumed
    const uint32_t stage = base + st * kStageBytes;

    // ---- scores: 64 tokens x (8 hi + 8 lo) ----
    float sacc[5][8];
#pragma unroll
    for (int gi = 0; gi < 5; ++gi)
#pragma unroll
      for (int e = 0; e < 8; ++e) sacc[gi][e] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 18; ++ks)
      wgmma_ss_n16(sacc[ks >> 2], desc64(stage + (ks >> 1) * kSlab + (ks & 1) * 32),
                   desc64(base + kOffQ + (ks >> 1) * kQSlab + (ks & 1) * 32), ks & 3);
    wgmma_commit();
#pragma unroll
    for (int gi = 0; gi < 5; ++gi) fence_accumulators(sacc[gi]);
    // While the scores run: this tile's V^T fragments for P.V (the stage is
    // then free once the scores are done).
    uint32_t a[2][8][4];
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, stage + i * kSlab + ks * 32 * 64 + v_lane);
        a[ks][i][0] = prmt2(r[0], r[1], 0x6420);  // dim 2g: tokens 2 q4, +1, 8 + 2 q4, +1
        a[ks][i][1] = prmt2(r[0], r[1], 0x7531);  // dim 2g + 1
        a[ks][i][2] = prmt2(r[2], r[3], 0x6420);  // tokens 16 + ...
        a[ks][i][3] = prmt2(r[2], r[3], 0x7531);
      }
    wgmma_wait<0>();
#pragma unroll
    for (int gi = 0; gi < 5; ++gi) fence_accumulators(sacc[gi]);

    // ---- scale, mask, tile maxima: tokens 16 warp + g + 8 r, heads 2 q4 + hh ----
    float s[2][2], w[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      const float sc = scale_s[st * wg::kTile + row];
      const float lsc = __log2f(sc);
      const bool valid = t * wg::kTile + row < ctx;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float acc = 0.f;
#pragma unroll
        for (int gi = 0; gi < 5; ++gi) acc += sacc[gi][2 * r + hh] + sacc[gi][4 + 2 * r + hh];
        s[r][hh] = valid ? acc * qinv[hh] * sc : -INFINITY;
        w[r][hh] = valid ? s[r][hh] + lsc : -INFINITY;
      }
    }
    float ms[2], mw[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      ms[hh] = fmaxf(s[0][hh], s[1][hh]);
      mw[hh] = fmaxf(w[0][hh], w[1][hh]);
#pragma unroll
      for (int k = 4; k < 32; k <<= 1) {
        ms[hh] = fmaxf(ms[hh], __shfl_xor_sync(0xffffffffu, ms[hh], k));
        mw[hh] = fmaxf(mw[hh], __shfl_xor_sync(0xffffffffu, mw[hh], k));
      }
    }
    if (g == 0)
      *reinterpret_cast<float4*>(red + (warp * 8 + 2 * q4) * 2) = make_float4(ms[0], mw[0], ms[1], mw[1]);
    __syncthreads();

    // ---- online softmax; P' * 256 as E4M3 hi + lo into P^T ----
    float alpha2[2], beta[2];
    uint32_t pk[2];  // per head: hi (tokens r = 0, 1) | lo << 16
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float tm = -INFINITY, tm2 = -INFINITY;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 v = *reinterpret_cast<const float2*>(red + (k * 8 + 2 * q4 + hh) * 2);
        tm = fmaxf(tm, v.x), tm2 = fmaxf(tm2, v.y);
      }
      const float m_new = fmaxf(m_run[hh], tm), m2_new = fmaxf(m2_run[hh], tm2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new, m2_use = m2_new == -INFINITY ? 0.f : m2_new;
      const float alpha1 = exp2f(m_run[hh] - m_use);
      alpha2[hh] = exp2f(m2_run[hh] - m2_use);
      m_run[hh] = m_new, m2_run[hh] = m2_new;
      l_part[hh] = l_part[hh] * alpha1 + exp2f(s[0][hh] - m_use) + exp2f(s[1][hh] - m_use);
      // P' relative to this tile's maximum (E4M3 spans ~2^17: only tokens under
      // 2^-17 of the tile's largest are lost); beta brings the tile to m2.
      const float t2_use = tm2 == -INFINITY ? 0.f : tm2;
      beta[hh] = tm2 == -INFINITY ? 0.f : exp2f(t2_use - m2_use);  // an all-zero-scale tile adds nothing
      const float x0 = exp2f(w[0][hh] - t2_use) * 256.f, x1 = exp2f(w[1][hh] - t2_use) * 256.f;
      const uint32_t hi = to_e4m3x2(x0, x1);
      const float2 back = from_e4m3x2(hi);
      pk[hh] = hi | (to_e4m3x2(x0 - back.x, x1 - back.y) << 16);
    }
    {
      const bool odd = g & 1;
      const uint32_t mine = odd ? pk[1] : pk[0];
      const uint32_t other = __shfl_xor_sync(0xffffffffu, odd ? pk[0] : pk[1], 4);
      // even g: [mine t, other t, mine t+8, other t+8]; odd g: the partner's first.
      const uint32_t hi = odd ? prmt2(mine, other, 0x1504) : prmt2(mine, other, 0x5140);
      const uint32_t lo = odd ? prmt2(mine, other, 0x3726) : prmt2(mine, other, 0x7362);
      *reinterpret_cast<uint32_t*>(smem + p_hi) = hi;
      *reinterpret_cast<uint32_t*>(smem + p_lo) = lo;
    }
    fence_proxy_async();
    __syncthreads();

    // ---- O^T += V^T . P'^T: dims 16 (4 i + warp) + [0, 16) of wgmma i ----
    // The stage is free: tile t + 2 into it.
    if (t + 2 < t_end) {
      load_tile(p, next_slot, ctx, t + 2, stage, base + kOffScale + st * wg::kTile * 4);
      if (t + 3 < t_end) tile_slots(p, table, ctx, t + 3, next_slot);
    }
    cp_async_commit();
    if (p.profile_skip & kMlaSkipValues) continue;
    float ot[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) ot[i][0] = ot[i][1] = ot[i][2] = ot[i][3] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        wgmma_rs_n8(ot[i], a[ks][i], desc64(base + kOffP + ks * 32), ks);
        wgmma_rs_n8(ot[i], a[ks][i], desc64(base + kOffP + 512 + ks * 32), 1);
      }
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 8; ++i) fence_accumulators(ot[i]);
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      fence_accumulators(ot[i]);
      o[i][0] = o[i][0] * alpha2[0] + ot[i][0] * beta[0];
      o[i][1] = o[i][1] * alpha2[1] + ot[i][1] * beta[1];
      o[i][2] = o[i][2] * alpha2[0] + ot[i][2] * beta[0];
      o[i][3] = o[i][3] * alpha2[1] + ot[i][3] * beta[1];
    }
  }
  cp_async_wait<0>();

  // ---- row sums; normalize; write ----
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
#pragma unroll
    for (int k = 4; k < 32; k <<= 1) l_part[hh] += __shfl_xor_sync(0xffffffffu, l_part[hh], k);
  __syncthreads();  // every warp is past its last read of `red`
  if (g == 0) *reinterpret_cast<float2*>(red + warp * 8 + 2 * q4) = make_float2(l_part[0], l_part[1]);
  __syncthreads();
  float out_scale[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int h = 2 * q4 + hh;
    const float l = red[h] + red[8 + h] + red[16 + h] + red[24 + h];
    out_scale[hh] = l > 0.f ? exp2f(m2_run[hh] - m_run[hh]) / (256.f * l) : 0.f;
    if (p.num_splits > 1 && warp == 0 && g == 0 && h < p.heads)
      p.ws_lse[(size_t(split) * p.batch + b) * p.heads + h] = l > 0.f ? m_run[hh] + log2f(l) : -INFINITY;
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int h = 2 * q4 + hh;
    if (h >= p.heads) continue;
    float* dst = p.num_splits == 1 ? p.out + (size_t(b) * p.heads + h) * kMlaValueDim
                                   : p.ws_o + ((size_t(split) * p.batch + b) * p.heads + h) * kMlaValueDim;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = 16 * (4 * i + warp) + 2 * g;
      *reinterpret_cast<float2*>(dst + d) = make_float2(o[i][hh] * out_scale[hh], o[i][2 + hh] * out_scale[hh]);
    }
  }
}

}  // namespace

cudaError_t launch_wgmma(const Params& p, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  const cudaError_t attr =
      ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_fp8_wgmma_kernel), kBytes, true);
  if (attr != cudaSuccess) return attr;
  mla_decode_fp8_wgmma_kernel<<<dim3(p.num_splits, p.batch, 1), wg::kThreads, kBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::mla
