// MLA absorbed-form decode attention (mla_decode.h, docs/mla-decode.md).
//
// One CTA = one sequence x one group of HB = 16*MT heads x one KV split; 8 warps.
// The split's KV is streamed in 64-token tiles through a cp.async pipeline
// (rows gathered through the block table, so any block size works). FP8 tiles
// are decoded once per tile into a BF16 tile in shared memory (exactly: E4M3
// values are BF16 values) and the per-token scale is folded into the scores and
// the probabilities instead of the 576 values; every head of the CTA then reads
// that one tile. Tensor cores: mma.sync m16n8k16 BF16 -> F32.
//   scores:  warp (mt, ng) computes heads [16mt, 16mt+16) x tokens [TW*ng, +TW)
//   softmax: online, in the log2 domain (q pre-scaled by scale*log2 e); the tile
//            maximum of each head is shared through shared memory so every warp
//            of a head tile uses the same running maximum
//   values:  warp (mt, ng) accumulates heads [16mt, +16) x dims [DW*ng, +DW)
// Shared tiles are stored with a 16-byte-chunk XOR swizzle (chunk ^ row%8 inside
// each 128-byte group) so every ldmatrix phase hits eight different bank groups.
// Splits write normalized partials and their log2-sum-exp; a combine kernel
// merges them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda/attention/mla_decode.h"

namespace mx::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = 8;
constexpr int kTile = 64;                          // tokens per pipeline tile
constexpr int kRowBf16 = kMlaHeadDim * 2;          // 1152 bytes, 72 chunks of 16
constexpr int kRowFp8 = kMlaHeadDim;               // 576 bytes, 36 chunks
constexpr int kTileBf16Bytes = kTile * kRowBf16;   // 73,728
constexpr int kTileFp8Bytes = kTile * kRowFp8;     // 36,864
constexpr int kMaxSmem = 232448;                   // sm_90 opt-in limit per block
constexpr float kLog2e = 1.4426950408889634f;

template <int MT, bool FP8>
struct Cfg {
  static constexpr int HB = 16 * MT;            // heads per CTA
  static constexpr int NW = kWarps / MT;        // warps sharing one 16-head tile
  static constexpr int TW = kTile / NW;         // tokens per warp in the scores
  static constexpr int NT = TW / 8;             // score n-tiles per warp (= MT)
  static constexpr int DW = kMlaValueDim / NW;  // value dims per warp
  static constexpr int NNT = DW / 8;            // output n-tiles per warp
  static constexpr int ACC = 4 / NT > 0 ? 4 / NT : 1;  // independent score accumulators
  static constexpr int NST = FP8 ? (MT == 4 ? 2 : 3) : 2;  // pipeline stages
  static constexpr int kStageBytes = FP8 ? kTileFp8Bytes : kTileBf16Bytes;
  static constexpr int kQ = 0;
  static constexpr int kTileOff = kQ + HB * kRowBf16;                 // FP8: decoded tile
  static constexpr int kStage = kTileOff + (FP8 ? kTileBf16Bytes : 0);
  static constexpr int kScale = kStage + NST * kStageBytes;           // FP8: F32 [NST][64]
  static constexpr int kP = kScale + (FP8 ? NST * kTile * 4 : 0);     // BF16 [HB][64]
  static constexpr int kRed = kP + HB * kTile * 2;                    // F32 [NW][HB]
  static constexpr int kBytes = kRed + NW * HB * 4;
  static_assert(kBytes <= kMaxSmem, "shared memory over the sm_90 limit");
};

struct Params {
  const float* q;
  const uint8_t* kv;
  const float* k_scale;
  const int32_t* block_tables;
  const int32_t* context_lens;
  float* out;
  float* ws_o;    // [splits, batch, heads, 512] (splits > 1)
  float* ws_lse;  // [splits, batch, heads]
  int batch, heads, max_blocks, block_size, num_splits;
  int block_shift;  // log2(block_size) when it is a power of two, else -1 (fused kernel)
  float q_scale;  // softmax scale * log2(e)
  int profile_skip;
};

// ---- small device helpers -------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile whose
// rows are `row_bytes` long (a multiple of 128).
__device__ __forceinline__ int swz(int row, int chunk, int row_bytes) {
  return row * row_bytes + (((chunk & ~7) | ((chunk ^ row) & 7)) << 4);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Four E4M3 bytes -> four BF16 (two words, low byte first) by moving bits:
// the 7 exponent/mantissa bits land in the BF16 exponent's low bits and the
// mantissa's top bits, the sign in the sign. The result is the E4M3 value times
// 2^-120 exactly (subnormals included: both formats' subnormals line up under
// that factor); callers fold 2^120 into q, the token scales and the output.
// Integer ALU only: the F32/F16 conversion instructions run at a quarter of the
// ALU rate and made the decode the bottleneck of the FP8 path.
__device__ __forceinline__ void fp8x4_to_bf16x4(uint32_t x, uint32_t& lo, uint32_t& hi) {
  const uint32_t y0 = __byte_perm(x, 0u, 0x1404);  // byte 0 -> bits 15..8, byte 1 -> bits 31..24
  const uint32_t y1 = __byte_perm(x, 0u, 0x3424);  // bytes 2, 3 likewise
  lo = ((y0 >> 4) & 0x07f007f0u) | (y0 & 0x80008000u);
  hi = ((y1 >> 4) & 0x07f007f0u) | (y1 & 0x80008000u);
}
constexpr float kFp8QBoost = 0x1p64f;    // q is multiplied by this for FP8 tiles ...
constexpr float kFp8OutBoost = 0x1p56f;  // ... so scores and outputs carry 2^-56 until scaled back

// ---- the tile pipeline ----------------------------------------------------

// Block-table entry of this thread's row of tile `tile` (0 past the context).
// Read one iteration ahead of its use so the global load's latency is hidden.
__device__ __forceinline__ int row_block(const Params& p, const int32_t* table, int ctx, int tile) {
  const int token = tile * kTile + (threadIdx.x >> 2);
  return token < ctx ? __ldg(table + token / p.block_size) : 0;
}

// Issues the copies of KV tile `tile` (64 tokens from `ctx`) into stage `st`.
// Thread (row = tid/4, sub = tid%4) copies every fourth 16-byte chunk of one
// token row whose block `block` it looked up beforehand (row_block).
template <int MT, bool FP8>
__device__ __forceinline__ void load_tile(const Params& p, int block, int ctx, int tile, uint8_t* smem, int st) {
  using C = Cfg<MT, FP8>;
  const int row = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const int token = tile * kTile + row;
  const bool valid = token < ctx;
  const size_t slot = size_t(block) * p.block_size + (valid ? token % p.block_size : 0);
  constexpr int kRow = FP8 ? kRowFp8 : kRowBf16;
  const uint8_t* src = p.kv + slot * kRow;
  uint8_t* stage = smem + C::kStage + st * C::kStageBytes;
#pragma unroll
  for (int j = 0; j < kRow / 16 / 4; ++j) {
    const int chunk = sub + 4 * j;
    const uint32_t dst = FP8 ? smem_addr(stage + row * kRowFp8 + chunk * 16)
                             : smem_addr(stage + swz(row, chunk, kRowBf16));
    cp_async16(dst, valid ? src + chunk * 16 : p.kv, valid);
  }
  if constexpr (FP8) {
    if (sub == 0) {
      float* scale = reinterpret_cast<float*>(smem + C::kScale) + st * kTile + row;
      cp_async4(smem_addr(scale), valid ? p.k_scale + slot : p.k_scale, valid);
    }
  }
}

// FP8 stage -> swizzled BF16 tile (values times 2^-120, unscaled: the token
// scale is applied to the scores and probabilities). Thread (row, sub) turns the
// 16-byte chunks sub, sub+4, ... of one row into two BF16 chunks each; the
// addresses are per-thread constants plus immediates.
template <int MT>
__device__ __forceinline__ void decode_fp8_tile(uint8_t* smem, int st) {
  using C = Cfg<MT, true>;
  const int row = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const uint8_t* src = smem + C::kStage + st * C::kStageBytes + row * kRowFp8 + sub * 16;
  uint8_t* dst = smem + C::kTileOff + row * kRowBf16;
  const int x0 = ((2 * sub) ^ row) & 7, x1 = ((2 * sub + 1) ^ row) & 7;
  // Loads three chunks ahead of their stores: stores to the tile may alias the
  // stage for all the compiler knows, so it would not hoist later loads.
#pragma unroll
  for (int j0 = 0; j0 < kRowFp8 / 64; j0 += 3) {
    uint4 raw[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) raw[j] = *reinterpret_cast<const uint4*>(src + 64 * (j0 + j));
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      uint4 a, b;
      fp8x4_to_bf16x4(raw[j].x, a.x, a.y);
      fp8x4_to_bf16x4(raw[j].y, a.z, a.w);
      fp8x4_to_bf16x4(raw[j].z, b.x, b.y);
      fp8x4_to_bf16x4(raw[j].w, b.z, b.w);
      *reinterpret_cast<uint4*>(dst + 128 * (j0 + j) + 16 * x0) = a;
      *reinterpret_cast<uint4*>(dst + 128 * (j0 + j) + 16 * x1) = b;
    }
  }
}

// q (F32) -> BF16 * softmax scale * log2 e, swizzled [HB][576]; heads past the
// last are zero (their scores are computed and never written).
template <int MT, bool FP8>
__device__ __forceinline__ void load_q(const Params& p, int b, int head0, uint8_t* smem) {
  using C = Cfg<MT, FP8>;
  for (int i = threadIdx.x; i < C::HB * (kRowBf16 / 16); i += kThreads) {
    const int h = i / (kRowBf16 / 16), chunk = i % (kRowBf16 / 16);
    uint4 out = make_uint4(0, 0, 0, 0);
    if (head0 + h < p.heads) {
      const float4* src = reinterpret_cast<const float4*>(p.q + (size_t(b) * p.heads + head0 + h) * kMlaHeadDim + chunk * 8);
      const float4 a = src[0], c = src[1];
      const float s = FP8 ? p.q_scale * kFp8QBoost : p.q_scale;
      out = make_uint4(pack_bf16x2(a.x * s, a.y * s), pack_bf16x2(a.z * s, a.w * s), pack_bf16x2(c.x * s, c.y * s),
                       pack_bf16x2(c.z * s, c.w * s));
    }
    *reinterpret_cast<uint4*>(smem + C::kQ + swz(h, chunk, kRowBf16)) = out;
  }
}

template <int MT, bool FP8>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_kernel(const Params p) {
  using C = Cfg<MT, FP8>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int split = blockIdx.x, b = blockIdx.y, head0 = blockIdx.z * C::HB;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;
  const int mt = warp % MT, ng = warp / MT;
  const int ctx = p.context_lens[b];
  const int tiles = (ctx + kTile - 1) / kTile;
  const int per_split = (tiles + p.num_splits - 1) / p.num_splits;
  const int t_begin = min(tiles, split * per_split), t_end = min(tiles, t_begin + per_split);
  const int32_t* table = p.block_tables + size_t(b) * p.max_blocks;

#pragma unroll
  for (int s = 0; s < C::NST - 1; ++s) {
    if (t_begin + s < t_end) load_tile<MT, FP8>(p, row_block(p, table, ctx, t_begin + s), ctx, t_begin + s, smem, s);
    cp_async_commit();
  }
  int next_block = t_begin + C::NST - 1 < t_end ? row_block(p, table, ctx, t_begin + C::NST - 1) : 0;
  load_q<MT, FP8>(p, b, head0, smem);
  __syncthreads();

  // Lane-dependent ldmatrix coordinates (A operand: 16 rows x 16 k; B: 8 rows x 4 chunks).
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_chunk = lane >> 4;
  const int q_row = mt * 16 + a_row;
  uint32_t qf[MT == 1 ? 36 : 1][4];
  if constexpr (MT == 1) {
#pragma unroll
    for (int ks = 0; ks < 36; ++ks) ldmatrix_x4(qf[ks], smem_addr(smem + C::kQ + swz(q_row, 2 * ks + a_chunk, kRowBf16)));
  }

  float* red = reinterpret_cast<float*>(smem + C::kRed);
  uint8_t* pbuf = smem + C::kP;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  float o[C::NNT][4];
#pragma unroll
  for (int n = 0; n < C::NNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    cp_async_wait<C::NST - 2>();
    __syncthreads();  // tile `t` landed for every thread; the previous tile is fully consumed
    if (t + C::NST - 1 < t_end) {
      load_tile<MT, FP8>(p, next_block, ctx, t + C::NST - 1, smem, (it + C::NST - 1) % C::NST);
      if (t + C::NST < t_end) next_block = row_block(p, table, ctx, t + C::NST);
    }
    cp_async_commit();
    const int st = it % C::NST;
    const uint8_t* tile;
    const float* scale = nullptr;
    if constexpr (FP8) {
      if (!(p.profile_skip & kMlaSkipFp8Decode)) decode_fp8_tile<MT>(smem, st);
      scale = reinterpret_cast<const float*>(smem + C::kScale) + st * kTile;
      tile = smem + C::kTileOff;
      __syncthreads();
    } else {
      tile = smem + C::kStage + st * C::kStageBytes;
    }

    // ---- scores s = q . k for 16 heads x TW tokens ----
    const int tok0 = ng * C::TW;
    float acc[C::ACC][C::NT][4];
#pragma unroll
    for (int a = 0; a < C::ACC; ++a)
#pragma unroll
      for (int n = 0; n < C::NT; ++n) acc[a][n][0] = acc[a][n][1] = acc[a][n][2] = acc[a][n][3] = 0.f;
#pragma unroll
    for (int kp = 0; kp < 18; ++kp) {
      uint32_t kb[C::NT][4];
#pragma unroll
      for (int n = 0; n < C::NT; ++n) {
        const int row = tok0 + n * 8 + (lane & 7);
        ldmatrix_x4(kb[n], smem_addr(tile + swz(row, 4 * kp + (lane >> 3), kRowBf16)));
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int ks = 2 * kp + j;
        uint32_t qa[4];
        if constexpr (MT == 1) {
          qa[0] = qf[ks][0], qa[1] = qf[ks][1], qa[2] = qf[ks][2], qa[3] = qf[ks][3];
        } else {
          ldmatrix_x4(qa, smem_addr(smem + C::kQ + swz(q_row, 2 * ks + a_chunk, kRowBf16)));
        }
#pragma unroll
        for (int n = 0; n < C::NT; ++n) mma_bf16(acc[ks % C::ACC][n], qa, kb[n][2 * j], kb[n][2 * j + 1]);
      }
    }

    // ---- scale, mask, tile maximum per head ----
    float s[C::NT][4];
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < C::NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = 0.f;
#pragma unroll
        for (int a = 0; a < C::ACC; ++a) v += acc[a][n][e];
        const int col = tok0 + n * 8 + 2 * q4 + (e & 1);
        if constexpr (FP8) v *= scale[col] * kFp8OutBoost;
        if (t * kTile + col >= ctx) v = -INFINITY;
        s[n][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if (q4 == 0) {
      red[ng * C::HB + mt * 16 + g] = mx[0];
      red[ng * C::HB + mt * 16 + g + 8] = mx[1];
    }
    __syncthreads();

    // ---- online softmax; P (times the FP8 token scale) to shared memory ----
    float alpha[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tmax = -INFINITY;
#pragma unroll
      for (int w = 0; w < C::NW; ++w) tmax = fmaxf(tmax, red[w * C::HB + mt * 16 + g + 8 * r]);
      const float m_new = fmaxf(m_run[r], tmax);
      m_use[r] = m_new == -INFINITY ? 0.f : m_new;
      alpha[r] = exp2f(m_run[r] - m_use[r]);
      m_run[r] = m_new;
      l_run[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < C::NT; ++n) {
      const int col = tok0 + n * 8 + 2 * q4;
      float pv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pv[e] = exp2f(s[n][e] - m_use[e >> 1]);
        l_run[e >> 1] += pv[e];
        if constexpr (FP8) pv[e] *= scale[col + (e & 1)] * kFp8QBoost;
      }
      const int chunk = col >> 3, row0 = mt * 16 + g;
      *reinterpret_cast<uint32_t*>(pbuf + swz(row0, chunk, kTile * 2) + (col & 7) * 2) = pack_bf16x2(pv[0], pv[1]);
      *reinterpret_cast<uint32_t*>(pbuf + swz(row0 + 8, chunk, kTile * 2) + (col & 7) * 2) = pack_bf16x2(pv[2], pv[3]);
    }
#pragma unroll
    for (int n = 0; n < C::NNT; ++n) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0];
      o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
    __syncthreads();

    // ---- o += P . V for 16 heads x DW dims ----
    if (p.profile_skip & kMlaSkipValues) continue;
#pragma unroll
    for (int kt = 0; kt < kTile / 16; ++kt) {
      uint32_t pa[4];
      ldmatrix_x4(pa, smem_addr(pbuf + swz(q_row, 2 * kt + a_chunk, kTile * 2)));
      const int v_row = kt * 16 + a_row;
#pragma unroll
      for (int np = 0; np < C::NNT / 2; ++np) {
        const int chunk = ng * (C::DW / 8) + 2 * np + a_chunk;
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, smem_addr(tile + swz(v_row, chunk, kRowBf16)));
        mma_bf16(o[2 * np], pa, vb[0], vb[1]);
        mma_bf16(o[2 * np + 1], pa, vb[2], vb[3]);
      }
    }
  }
  cp_async_wait<0>();

  // ---- row sums over the warps of a head tile; normalize; write ----
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  __syncthreads();  // every warp is past its last read of `red`
  if (q4 == 0) {
    red[ng * C::HB + mt * 16 + g] = l_run[0];
    red[ng * C::HB + mt * 16 + g + 8] = l_run[1];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < C::NW; ++w) l += red[w * C::HB + mt * 16 + g + 8 * r];
    const int h = head0 + mt * 16 + g + 8 * r;
    if (h >= p.heads) continue;
    const float inv = l > 0.f ? (FP8 ? kFp8OutBoost : 1.f) / l : 0.f;
    float* dst = p.num_splits == 1 ? p.out + (size_t(b) * p.heads + h) * kMlaValueDim
                                   : p.ws_o + ((size_t(split) * p.batch + b) * p.heads + h) * kMlaValueDim;
#pragma unroll
    for (int n = 0; n < C::NNT; ++n) {
      const int d = ng * C::DW + n * 8 + 2 * q4;
      *reinterpret_cast<float2*>(dst + d) = make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
    if (p.num_splits > 1 && ng == 0 && q4 == 0)
      p.ws_lse[(size_t(split) * p.batch + b) * p.heads + h] = l > 0.f ? m_run[r] + log2f(l) : -INFINITY;
  }
}

// ---- FP8 fused kernel (heads <= 16) -----------------------------------------
//
// The tiled kernel decodes each FP8 tile into a BF16 tile in shared memory and
// runs decode -> scores -> softmax -> P.V between barriers with one CTA per SM:
// nothing overlaps, so it runs at ~39% of the copy bandwidth. This kernel
// decodes in registers, straight into the mma operands, and keeps no BF16
// tile: 32-token tiles, 104 KB of shared memory and <= 128 registers, so two
// CTAs share an SM and one's barriers hide behind the other's work.
//   scores:  warp (tg, kq) = (warp % 2, warp / 2) computes 16 heads x 16 tokens
//            [16 tg, +16) over dims [144 kq, +144): the B operand (K) comes from
//            one 32-bit load of four FP8 bytes per k-step; the dot product does
//            not care about the order of k, so the four bytes (dims 4 q4 .. +3 of
//            the k-step) stand for the mma's k = 2q4, 2q4+1, 2q4+8, 2q4+9, and q
//            is loaded in the same order. Partial scores go to shared memory.
//   softmax: warp w owns heads 2w, 2w+1 (16 lanes each, two tokens a lane): sums
//            the four partials, scales, masks, keeps the running max and sum,
//            writes P (times the token scale, BF16) and the rescale factor.
//   values:  warp w accumulates 16 heads x dims [64 w, +64): ldmatrix.trans
//            of the FP8 rows gives each lane two tokens x two adjacent dims in
//            one register, which two byte permutes turn into the B operands of
//            the even-dim and the odd-dim n-tile.
// The FP8 rows are stored with a 16-byte-chunk XOR swizzle (fp8_pos) that keeps
// the 32-bit score loads, the ldmatrix phases and the cp.async stores free of
// bank conflicts.
namespace fused {
constexpr int kTile = 32;
constexpr int kStages = 5;
constexpr int kStageBytes = kTile * kRowFp8;            // 18,432
constexpr int kHeads = 16;
constexpr int kKq = 4;                                  // score warps along the 576 dims
constexpr int kPartStride = kTile + 8;                  // floats per head row (pad: no bank conflicts)
constexpr int kOffScale = kStages * kStageBytes;        // F32 [stages][32]
constexpr int kOffPart = kOffScale + kStages * kTile * 4;  // F32 [kq][16][40]
constexpr int kOffP = kOffPart + kKq * kHeads * kPartStride * 4;  // BF16 [16][32], swizzled
constexpr int kOffAlpha = kOffP + kHeads * kTile * 2;   // F32 [16]
constexpr int kOffL = kOffAlpha + kHeads * 4;           // F32 [16]
constexpr int kBytes = kOffL + kHeads * 4;              // 104,192: two CTAs per SM
static_assert(2 * (kBytes + 1024) <= 233472, "two CTAs must fit an SM's shared memory");
}  // namespace fused

// Chunk slot of 16-byte chunk `chunk` (0..35) of FP8 row `row`: XOR swizzle
// inside each 8-chunk group of the values, inside the last 4 chunks (rope) by
// row / 2.
__device__ __forceinline__ int fp8_pos(int row, int chunk) {
  return chunk < 32 ? (chunk & ~7) | ((chunk ^ row) & 7) : 32 | ((chunk ^ (row >> 1)) & 3);
}
// P tile [16 heads][32 tokens] BF16: 64-byte rows, chunk XOR row / 2.
__device__ __forceinline__ int p_pos(int row, int chunk) { return row * 64 + (((chunk ^ (row >> 1)) & 3) << 4); }

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(0u), "r"(sel));
  return r;
}
// Two E4M3 bytes of x -> BF16x2 (the E4M3 value times 2^-120, as
// fp8x4_to_bf16x4): SEL puts byte i in the low byte of a 16-bit half and its
// sign, replicated, in the high byte (prmt's sign mode); a shift by 4 lines up
// exponent and mantissa and carries the sign to bit 15; one mask keeps those.
template <uint32_t SEL>
__device__ __forceinline__ uint32_t fp8x2(uint32_t x) {
  return (prmt(x, SEL) << 4) & 0x87f087f0u;
}
constexpr uint32_t kBytes01 = 0x9180, kBytes23 = 0xB3A2, kBytes02 = 0xA280, kBytes13 = 0xB391;

// Cache slot (block * block_size + offset) of this thread's row of tile `tile`
// (0 past the context), looked up one tile ahead of its copy. A slot fits 32
// bits: 2^32 rows of 576 bytes would be 2.5 TB of cache.
__device__ __forceinline__ uint32_t fused_row_slot(const Params& p, const int32_t* table, int ctx, int tile) {
  const int token = tile * fused::kTile + (threadIdx.x >> 3);
  if (token >= ctx) return 0;
  int blk, off;
  if (p.block_shift >= 0) {
    blk = token >> p.block_shift, off = token & ((1 << p.block_shift) - 1);
  } else {
    blk = token / p.block_size, off = token - blk * p.block_size;
  }
  return uint32_t(__ldg(table + blk)) * uint32_t(p.block_size) + uint32_t(off);
}

// Tile `tile` (32 tokens) into stage `st`: thread (row = tid / 8, sub = tid % 8)
// copies chunks sub, sub + 8, ... of one row. Chunk sub + 8j (j < 4) sits at
// slot 8j + (sub ^ row) % 8 (fp8_pos), so one per-thread offset plus
// immediates addresses all of them; chunk 32 + sub (sub < 4) at 32 + (sub ^ row/2) % 4.
__device__ __forceinline__ void fused_load_tile(const Params& p, uint32_t slot, int ctx, int tile, uint8_t* smem, int st) {
  const int row = threadIdx.x >> 3, sub = threadIdx.x & 7;
  const bool valid = tile * fused::kTile + row < ctx;
  const uint8_t* src = valid ? p.kv + size_t(slot) * kRowFp8 + sub * 16 : p.kv;
  const uint32_t dst = smem_addr(smem + st * fused::kStageBytes + row * kRowFp8);
  const uint32_t body = dst + (((sub ^ row) & 7) << 4);
#pragma unroll
  for (int j = 0; j < 4; ++j) cp_async16(body + 128 * j, valid ? src + 128 * j : src, valid);
  if (sub < 4) cp_async16(dst + ((32 | ((sub ^ (row >> 1)) & 3)) << 4), valid ? src + 512 : src, valid);
  if (sub == 0) {
    float* scale = reinterpret_cast<float*>(smem + fused::kOffScale) + st * fused::kTile + row;
    cp_async4(smem_addr(scale), valid ? p.k_scale + slot : p.k_scale, valid);
  }
}

__global__ void __launch_bounds__(kThreads, 2) mla_decode_fp8_fused_kernel(const Params p) {
  using fused::kHeads, fused::kKq, fused::kOffAlpha, fused::kOffL, fused::kOffP, fused::kOffPart, fused::kOffScale,
      fused::kPartStride, fused::kStageBytes, fused::kStages, fused::kTile;  // kTile: the fused one here
  extern __shared__ __align__(128) uint8_t smem[];
  const int split = blockIdx.x, b = blockIdx.y, head0 = blockIdx.z * kHeads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;
  const int tg = warp & 1, kq = warp >> 1;
  const int ctx = p.context_lens[b];
  const int tiles = (ctx + kTile - 1) / kTile;
  const int per_split = (tiles + p.num_splits - 1) / p.num_splits;
  const int t_begin = min(tiles, split * per_split), t_end = min(tiles, t_begin + per_split);
  const int32_t* table = p.block_tables + size_t(b) * p.max_blocks;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (t_begin + s < t_end) fused_load_tile(p, fused_row_slot(p, table, ctx, t_begin + s), ctx, t_begin + s, smem, s);
    cp_async_commit();
  }
  uint32_t next_slot = t_begin + kStages - 1 < t_end ? fused_row_slot(p, table, ctx, t_begin + kStages - 1) : 0;

  // q fragments of this warp's 9 k-steps, in the permuted k order (see above),
  // times softmax scale * log2 e * 2^64; heads past the last are zero.
  uint32_t qa[9][4];
  {
    const float s = p.q_scale * kFp8QBoost;
    const bool v0 = head0 + g < p.heads, v1 = head0 + g + 8 < p.heads;
    const float* q0 = p.q + (size_t(b) * p.heads + head0 + g) * kMlaHeadDim;
    const float* q1 = q0 + 8 * kMlaHeadDim;
#pragma unroll
    for (int i = 0; i < 9; ++i) {
      const int d = 16 * (9 * kq + i) + 4 * q4;
      const float4 x = v0 ? __ldg(reinterpret_cast<const float4*>(q0 + d)) : make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 y = v1 ? __ldg(reinterpret_cast<const float4*>(q1 + d)) : make_float4(0.f, 0.f, 0.f, 0.f);
      qa[i][0] = pack_bf16x2(x.x * s, x.y * s);
      qa[i][1] = pack_bf16x2(y.x * s, y.y * s);
      qa[i][2] = pack_bf16x2(x.z * s, x.w * s);
      qa[i][3] = pack_bf16x2(y.z * s, y.w * s);
    }
  }
  // Lane-dependent ldmatrix coordinates (16 rows x 2 chunks) and the
  // tile-invariant parts of the P.V addresses: row a_row (plus 16 per k-tile,
  // which leaves the swizzle unchanged) of the P tile and of the stage.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_chunk = lane >> 4;
  const uint32_t p_addr0 = smem_addr(smem + kOffP + p_pos(a_row, a_chunk));
  const uint32_t p_addr1 = smem_addr(smem + kOffP + p_pos(a_row, 2 + a_chunk));
  const int v_off0 = a_row * kRowFp8 + fp8_pos(a_row, 4 * warp + a_chunk) * 16;
  // Score loads: row 16 tg + g, bytes 4 q4 of the chunk of k-step 9 kq + i.
  int s_off[9];
#pragma unroll
  for (int i = 0; i < 9; ++i) s_off[i] = (16 * tg + g) * kRowFp8 + 4 * q4 + fp8_pos(g, 9 * kq + i) * 16;
  const int v_off1 = a_row * kRowFp8 + fp8_pos(a_row, 4 * warp + 2 + a_chunk) * 16;

  float* part = reinterpret_cast<float*>(smem + kOffPart);
  uint8_t* pbuf = smem + kOffP;
  float* alpha_s = reinterpret_cast<float*>(smem + kOffAlpha);
  float* l_s = reinterpret_cast<float*>(smem + kOffL);
  const int own_head = 2 * warp + (lane >> 4), own_j = lane & 15;  // softmax: head, token pair
  float m_run = -INFINITY, l_part = 0.f;
  float o[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t landed for every thread; tile t-1, P and the partials are consumed
    if (t + kStages - 1 < t_end) {
      fused_load_tile(p, next_slot, ctx, t + kStages - 1, smem, (it + kStages - 1) % kStages);
      if (t + kStages < t_end) next_slot = fused_row_slot(p, table, ctx, t + kStages);
    }
    cp_async_commit();
    const int st = it % kStages;
    const uint8_t* stage = smem + st * kStageBytes;
    const float* scale = reinterpret_cast<const float*>(smem + kOffScale) + st * kTile;

    // ---- partial scores: 16 heads x 16 tokens over 144 dims ----
    {
      float acc[2][2][4];
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int a = 0; a < 2; ++a) acc[n][a][0] = acc[n][a][1] = acc[n][a][2] = acc[n][a][3] = 0.f;
      // Rows 16 tg + g and 16 tg + 8 + g share their swizzle (row % 8), so the
      // second n-tile's load is the first's plus an immediate.
#pragma unroll
      for (int i = 0; i < 9; ++i) {
        const uint8_t* rp = stage + s_off[i];
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const uint32_t w = *reinterpret_cast<const uint32_t*>(rp + n * 8 * kRowFp8);
          mma_bf16(acc[n][i & 1], qa[i], fp8x2<kBytes01>(w), fp8x2<kBytes23>(w));
        }
      }
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int tok = 16 * tg + 8 * n + 2 * q4;
        float* dst = part + (kq * kHeads + g) * kPartStride + tok;
        *reinterpret_cast<float2*>(dst) = make_float2(acc[n][0][0] + acc[n][1][0], acc[n][0][1] + acc[n][1][1]);
        *reinterpret_cast<float2*>(dst + 8 * kPartStride) =
            make_float2(acc[n][0][2] + acc[n][1][2], acc[n][0][3] + acc[n][1][3]);
      }
    }
    __syncthreads();

    // ---- online softmax of head own_head, tokens 2 own_j, +1 ----
    {
      float2 s = make_float2(0.f, 0.f);
#pragma unroll
      for (int k = 0; k < kKq; ++k) {
        const float2 v = *reinterpret_cast<const float2*>(part + (k * kHeads + own_head) * kPartStride + 2 * own_j);
        s.x += v.x, s.y += v.y;
      }
      const float2 sc = *reinterpret_cast<const float2*>(scale + 2 * own_j);
      const int tok = t * kTile + 2 * own_j;
      s.x = tok < ctx ? s.x * sc.x * kFp8OutBoost : -INFINITY;
      s.y = tok + 1 < ctx ? s.y * sc.y * kFp8OutBoost : -INFINITY;
      float mx = fmaxf(s.x, s.y);
#pragma unroll
      for (int k = 1; k < 16; k <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, k));
      const float m_new = fmaxf(m_run, mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m_run - m_use);
      m_run = m_new;
      const float p0 = exp2f(s.x - m_use), p1 = exp2f(s.y - m_use);
      l_part = l_part * alpha + p0 + p1;
      *reinterpret_cast<uint32_t*>(pbuf + p_pos(own_head, own_j >> 2) + (own_j & 3) * 4) =
          pack_bf16x2(p0 * sc.x * kFp8QBoost, p1 * sc.y * kFp8QBoost);
      if (own_j == 0) alpha_s[own_head] = alpha;
    }
    __syncthreads();

    // ---- o += P . V for 16 heads x dims [64 warp, +64) ----
    if (p.profile_skip & kMlaSkipValues) continue;
    {
      // Once the running maxima settle the factors are exactly 1: skip the 32
      // multiplies (~6% of the tile's instructions) when all of the warp's are.
      const float a0 = alpha_s[g], a1 = alpha_s[g + 8];
      if (!__all_sync(0xffffffffu, a0 == 1.f && a1 == 1.f)) {
#pragma unroll
        for (int n = 0; n < 8; ++n) o[n][0] *= a0, o[n][1] *= a0, o[n][2] *= a1, o[n][3] *= a1;
      }
    }
    const uint32_t stage_addr = smem_addr(stage);
#pragma unroll
    for (int kt = 0; kt < kTile / 16; ++kt) {
      uint32_t pa[4];
      ldmatrix_x4(pa, kt == 0 ? p_addr0 : p_addr1);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, stage_addr + (h == 0 ? v_off0 : v_off1) + kt * 16 * kRowFp8);
        mma_bf16(o[4 * h + 0], pa, fp8x2<kBytes02>(r[0]), fp8x2<kBytes02>(r[1]));
        mma_bf16(o[4 * h + 1], pa, fp8x2<kBytes13>(r[0]), fp8x2<kBytes13>(r[1]));
        mma_bf16(o[4 * h + 2], pa, fp8x2<kBytes02>(r[2]), fp8x2<kBytes02>(r[3]));
        mma_bf16(o[4 * h + 3], pa, fp8x2<kBytes13>(r[2]), fp8x2<kBytes13>(r[3]));
      }
    }
  }
  cp_async_wait<0>();

  // ---- row sums; normalize; write ----
  float l = l_part;
#pragma unroll
  for (int k = 1; k < 16; k <<= 1) l += __shfl_xor_sync(0xffffffffu, l, k);
  if (own_j == 0) {
    l_s[own_head] = l;
    const int h = head0 + own_head;
    if (p.num_splits > 1 && h < p.heads)
      p.ws_lse[(size_t(split) * p.batch + b) * p.heads + h] = l > 0.f ? m_run + log2f(l) : -INFINITY;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = head0 + g + 8 * r;
    if (h >= p.heads) continue;
    const float lh = l_s[g + 8 * r];
    const float inv = lh > 0.f ? kFp8OutBoost / lh : 0.f;
    float* dst = p.num_splits == 1 ? p.out + (size_t(b) * p.heads + h) * kMlaValueDim
                                   : p.ws_o + ((size_t(split) * p.batch + b) * p.heads + h) * kMlaValueDim;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      // n-tile 2c holds the even dims of chunk 4 warp + c, 2c + 1 the odd ones.
      const int d = 16 * (4 * warp + c) + 4 * q4;
      *reinterpret_cast<float4*>(dst + d) = make_float4(o[2 * c][2 * r] * inv, o[2 * c + 1][2 * r] * inv,
                                                        o[2 * c][2 * r + 1] * inv, o[2 * c + 1][2 * r + 1] * inv);
    }
  }
}

// Merges the splits' normalized partials by their log2-sum-exp weights.
// One CTA of 128 threads per (head, sequence); each thread owns 4 dims.
__global__ void __launch_bounds__(128) mla_combine_kernel(const Params p) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x * 4;
  const size_t stride = size_t(p.batch) * p.heads;
  const size_t row = size_t(b) * p.heads + h;
  float lmax = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) lmax = fmaxf(lmax, p.ws_lse[s * stride + row]);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float wsum = 0.f;
  if (lmax != -INFINITY) {
    for (int s = 0; s < p.num_splits; ++s) {
      const float lse = p.ws_lse[s * stride + row];
      if (lse == -INFINITY) continue;
      const float w = exp2f(lse - lmax);
      const float4 v = *reinterpret_cast<const float4*>(p.ws_o + (s * stride + row) * kMlaValueDim + d);
      acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
      wsum += w;
    }
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  *reinterpret_cast<float4*>(p.out + row * kMlaValueDim + d) = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

int heads_per_cta(int heads) { return heads <= 16 ? 16 : heads <= 32 ? 32 : 64; }

// Raises a kernel's dynamic shared-memory limit once per device (the
// attribute is per device, and one process may drive several GPUs). The fused
// kernel also asks for the largest shared-memory carveout so two CTAs fit.
cudaError_t ensure_smem_limit(std::atomic<uint64_t>& done, const void* kernel, int bytes, bool max_carveout) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && max_carveout)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  if (err == cudaSuccess && bit) done.fetch_or(bit, std::memory_order_release);
  return err;
}

template <int MT, bool FP8>
cudaError_t ensure_smem_limit() {
  static std::atomic<uint64_t> done{0};
  return ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_kernel<MT, FP8>), Cfg<MT, FP8>::kBytes, false);
}

cudaError_t launch_fused(const Params& p, int head_groups, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  const cudaError_t attr =
      ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_fp8_fused_kernel), fused::kBytes, true);
  if (attr != cudaSuccess) return attr;
  mla_decode_fp8_fused_kernel<<<dim3(p.num_splits, p.batch, head_groups), kThreads, fused::kBytes, stream>>>(p);
  return cudaGetLastError();
}

template <int MT, bool FP8>
cudaError_t launch(const Params& p, int head_groups, cudaStream_t stream) {
  using C = Cfg<MT, FP8>;
  const cudaError_t attr = ensure_smem_limit<MT, FP8>();
  if (attr != cudaSuccess) return attr;
  mla_decode_kernel<MT, FP8><<<dim3(p.num_splits, p.batch, head_groups), kThreads, C::kBytes, stream>>>(p);
  return cudaGetLastError();
}

template <bool FP8>
cudaError_t launch_for_heads(const Params& p, int head_groups, cudaStream_t stream) {
  switch (heads_per_cta(p.heads)) {
    case 16: return launch<1, FP8>(p, head_groups, stream);
    case 32: return launch<2, FP8>(p, head_groups, stream);
    default: return launch<4, FP8>(p, head_groups, stream);
  }
}

void check_shape(const MlaDecodeShape& s) {
  if (s.batch < 1 || s.heads < 1 || s.max_blocks < 1 || s.block_size < 1)
    fail_input("mla_decode: batch {}, heads {}, max_blocks {}, block_size {} must all be >= 1", s.batch, s.heads,
               s.max_blocks, s.block_size);
}

// The kernel that runs a shape (kAuto resolved); throws on a forced choice
// that cannot run it. kAuto stays on the tiled kernel until the fused one has
// passed the correctness cases and been timed on a GPU (docs/mla-decode.md,
// "Fused FP8 kernel": it was written and checked on the CPU only).
MlaDecodeKernel resolve_kernel(const MlaDecodeShape& s, MlaDecodeKernel k) {
  const bool fused_fits = s.kv_dtype == MlaKvDtype::kFP8E4M3 && s.heads <= fused::kHeads;
  // Measured on an H200 (bench/attention/mla_decode_results.md, 2026-11-30):
  // the fused FP8 kernel wins from batch 32 (8K context, 8/16 heads: 54.6% vs
  // 38.5% of copy bandwidth at batch 64) and ties at batch 8; at batch 1 the
  // tiled kernel's finer splits win (40 vs 71 us).
  if (k == MlaDecodeKernel::kAuto)
    return fused_fits && s.batch >= 8 ? MlaDecodeKernel::kFp8Fused : MlaDecodeKernel::kTiled;
  if (k == MlaDecodeKernel::kFp8Fused && !fused_fits)
    fail_input("mla_decode: the fused kernel needs an FP8 cache and at most {} heads (got {} heads)", fused::kHeads,
               s.heads);
  return k;
}

}  // namespace

int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms) {
  return mla_decode_default_splits(shape, num_sms, MlaDecodeKernel::kAuto);
}

int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms, MlaDecodeKernel kernel) {
  check_shape(shape);
  const bool fused_kernel = resolve_kernel(shape, kernel) == MlaDecodeKernel::kFp8Fused;
  const int tile = fused_kernel ? fused::kTile : kTile;
  const long slots = long(std::max(num_sms, 1)) * (fused_kernel ? 2 : 1);  // CTAs resident at once
  const double fixed = fused_kernel ? 2.0 : 1.0;                          // ~64 tokens' worth, in tiles
  const long max_tiles = (long(shape.max_blocks) * shape.block_size + tile - 1) / tile;
  const long ctas = long(shape.batch) * ((shape.heads + heads_per_cta(shape.heads) - 1) / heads_per_cta(shape.heads));
  // Cost model in tile-times: waves x (tiles per split + a fixed cost per CTA:
  // q load, pipeline fill, partial write and its share of the combine).
  int best = 1;
  double best_cost = 1e30;
  const long limit = std::min<long>(max_tiles, 256);
  for (long s = 1; s <= limit; ++s) {
    const long waves = (ctas * s + slots - 1) / slots;
    const double cost = double(waves) * (double((max_tiles + s - 1) / s) + fixed);
    if (cost < best_cost - 1e-9) best_cost = cost, best = int(s);
  }
  return best;
}

size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape, int num_splits, int num_sms) {
  const int splits = num_splits > 0 ? num_splits : mla_decode_default_splits(shape, num_sms);
  if (splits <= 1) return 0;
  const size_t rows = size_t(splits) * shape.batch * shape.heads;
  const size_t o_bytes = rows * kMlaValueDim * sizeof(float);
  return o_bytes + ((rows * sizeof(float) + 15) / 16) * 16;
}

cudaError_t mla_decode(const MlaDecodeArgs& args, int num_sms, cudaStream_t stream) {
  const MlaDecodeShape& s = args.shape;
  check_shape(s);
  const bool fp8 = s.kv_dtype == MlaKvDtype::kFP8E4M3;
  if (!args.q || !args.k_cache || !args.block_tables || !args.context_lens || !args.out)
    fail_input("mla_decode: q, k_cache, block_tables, context_lens and out must be device pointers");
  if (fp8 && !args.k_scale) fail_input("mla_decode: an FP8 cache needs k_scale");
  const MlaDecodeKernel kernel = resolve_kernel(s, args.kernel);
  const int splits = args.num_splits > 0 ? args.num_splits : mla_decode_default_splits(s, num_sms, kernel);
  if (splits > 1 && !args.workspace)
    fail_input("mla_decode: {} splits need a workspace of {} bytes", splits, mla_decode_workspace_bytes(s, splits, num_sms));
  if (splits > 65535) fail_input("mla_decode: {} splits is over the grid limit", splits);

  Params p{};
  p.q = args.q;
  p.kv = static_cast<const uint8_t*>(args.k_cache);
  p.k_scale = args.k_scale;
  p.block_tables = args.block_tables;
  p.context_lens = args.context_lens;
  p.out = args.out;
  p.batch = s.batch, p.heads = s.heads, p.max_blocks = s.max_blocks, p.block_size = s.block_size;
  p.num_splits = splits;
  p.block_shift = (s.block_size & (s.block_size - 1)) == 0 ? __builtin_ctz(unsigned(s.block_size)) : -1;
  p.q_scale = args.softmax_scale * kLog2e;
  p.profile_skip = args.profile_skip;
  if (splits > 1) {
    p.ws_o = static_cast<float*>(args.workspace);
    p.ws_lse = p.ws_o + size_t(splits) * s.batch * s.heads * kMlaValueDim;
  }
  const int head_groups = (s.heads + heads_per_cta(s.heads) - 1) / heads_per_cta(s.heads);
  cudaError_t err = kernel == MlaDecodeKernel::kFp8Fused ? launch_fused(p, head_groups, stream)
                    : fp8                                ? launch_for_heads<true>(p, head_groups, stream)
                                                         : launch_for_heads<false>(p, head_groups, stream);
  if (err != cudaSuccess || splits == 1) return err;
  mla_combine_kernel<<<dim3(s.heads, s.batch), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda
