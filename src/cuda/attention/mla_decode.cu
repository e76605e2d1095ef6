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
// merges them. The FP8 fused kernel (heads <= 16) lives in mla_decode_fused.cu;
// what both kernels share, in mla_decode_common.cuh.
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
#include "cuda/attention/mla_decode_common.cuh"

namespace mx::cuda {
namespace {

using namespace mla;

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

}  // namespace

namespace mla {

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

}  // namespace mla

namespace {


template <int MT, bool FP8>
cudaError_t ensure_tiled_smem_limit() {
  static std::atomic<uint64_t> done{0};
  return mla::ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_kernel<MT, FP8>), Cfg<MT, FP8>::kBytes, false);
}

template <int MT, bool FP8>
cudaError_t launch(const Params& p, int head_groups, cudaStream_t stream) {
  using C = Cfg<MT, FP8>;
  const cudaError_t attr = ensure_tiled_smem_limit<MT, FP8>();
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
// that cannot run it.
MlaDecodeKernel resolve_kernel(const MlaDecodeShape& s, MlaDecodeKernel k) {
  const bool fp8_small = s.kv_dtype == MlaKvDtype::kFP8E4M3 && s.heads <= fused::kHeads;
  // Measured on an H200 (bench/attention/mla_decode_results.md, 2026-11-30):
  // the fused FP8 kernel wins from batch 32 (8K context, 8/16 heads: 54.6% vs
  // 38.5% of copy bandwidth at batch 64) and ties at batch 8; at batch 1 the
  // tiled kernel's finer splits win (40 vs 71 us). Two other FP8 kernels for
  // <= 16 heads (E4M3 mma.sync; BF16 with heads as the mma's N) were slower at
  // every measured shape and were removed (docs/mla-decode.md). The wgmma
  // kernel (<= 8 heads; both products on FP8 wgmma) beat the fused one at every
  // measured batch from 8 (batch 64 x 8K: 100.6 vs 131.6 us, 71.4% of copy
  // bandwidth; batch 8: 30.5 vs 33.6; results file, 2026-11-30) and passed
  // every bench case (56/56 with the other kernels'); at batch 1 it ties the
  // tiled kernel (39.6 vs ~40 us), which keeps batch < 8.
  if (k == MlaDecodeKernel::kAuto) {
    if (!fp8_small || s.batch < 8) return MlaDecodeKernel::kTiled;
    return s.heads <= wgmma_kernel::kHeads ? MlaDecodeKernel::kFp8Wgmma : MlaDecodeKernel::kFp8Fused;
  }
  if (k == MlaDecodeKernel::kFp8Fused && !fp8_small)
    fail_input("mla_decode: the fused kernel needs an FP8 cache and at most {} heads (got {} heads)", fused::kHeads,
               s.heads);
  if (k == MlaDecodeKernel::kFp8Wgmma && (s.kv_dtype != MlaKvDtype::kFP8E4M3 || s.heads > wgmma_kernel::kHeads))
    fail_input("mla_decode: the wgmma kernel needs an FP8 cache and at most {} heads (got {} heads)",
               wgmma_kernel::kHeads, s.heads);
  return k;
}

}  // namespace

int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms) {
  return mla_decode_default_splits(shape, num_sms, MlaDecodeKernel::kAuto);
}

int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms, MlaDecodeKernel kernel) {
  check_shape(shape);
  const MlaDecodeKernel resolved = resolve_kernel(shape, kernel);
  // The fused kernel: 32-token tiles, two CTAs per SM; the wgmma kernel:
  // 64-token tiles, two CTAs per SM.
  const bool fused_kernel = resolved == MlaDecodeKernel::kFp8Fused;
  const bool two_per_sm = fused_kernel || resolved == MlaDecodeKernel::kFp8Wgmma;
  const int tile = fused_kernel                                 ? fused::kTile
                   : resolved == MlaDecodeKernel::kFp8Wgmma ? wgmma_kernel::kTile
                                                            : kTile;
  const long slots = long(std::max(num_sms, 1)) * (two_per_sm ? 2 : 1);  // CTAs resident at once
  const double fixed = fused_kernel ? 2.0 : 1.0;                         // ~64 tokens' worth, in tiles
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
  cudaError_t err = kernel == MlaDecodeKernel::kFp8Wgmma ? launch_wgmma(p, stream)
                    : kernel == MlaDecodeKernel::kFp8Fused ? launch_fused(p, head_groups, stream)
                    : fp8                                ? launch_for_heads<true>(p, head_groups, stream)
                                                         : launch_for_heads<false>(p, head_groups, stream);
  if (err != cudaSuccess || splits == 1) return err;
  mla_combine_kernel<<<dim3(s.heads, s.batch), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda
