// The FP8 fused MLA decode kernel (heads <= 16): FP8 decoded in registers
// straight into the mma operands, 32-token tiles, two CTAs per SM. Its design
// is described beside its constants in mla_decode_common.cuh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/attention/mla_decode_common.cuh"

namespace mx::cuda::mla {
namespace {


// P tile [16 heads][32 tokens] BF16: 64-byte rows, chunk XOR row / 2.
__device__ __forceinline__ int p_pos(int row, int chunk) { return row * 64 + (((chunk ^ (row >> 1)) & 3) << 4); }

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


}  // namespace

cudaError_t launch_fused(const Params& p, int head_groups, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  const cudaError_t attr =
      ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_fp8_fused_kernel), fused::kBytes, true);
  if (attr != cudaSuccess) return attr;
  mla_decode_fp8_fused_kernel<<<dim3(p.num_splits, p.batch, head_groups), kThreads, fused::kBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::mla
