// The swapped-operand FP8 MLA decode kernel (heads <= 16): BF16 mma.m16n8k16
// with tokens / dims as M and heads as N (8 heads fill N = 8 instead of half
// of M = 16), FP8 decoded in registers into the A operand. Its design is
// described beside its constants in mla_decode_common.cuh (namespace swap).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/attention/mla_decode_common.cuh"

namespace mx::cuda::mla {
namespace {

using swap::kHeads, swap::kKq, swap::kKSteps, swap::kKStepsPerWarp, swap::kPartStride, swap::kOffPart, swap::kOffP,
    swap::kOffAlpha, swap::kOffL, swap::kBytes, swap::kStages;
using fused::kStageBytes;
constexpr int kTile32 = swap::kTile;  // not mla::kTile (64, the tiled kernel's)

// Byte offset of token t (0..31) in a P row (BF16, 64 bytes): lane q4's four
// B registers of the value mma (tokens 2 q4 + {0, 8, 16, 24}, +1) are one
// 16-byte load at 16 q4.
__device__ __forceinline__ int p_off(int t) { return 16 * ((t & 7) >> 1) + 4 * (t >> 3) + 2 * (t & 1); }

template <int NT>  // n-tiles of 8 heads: 1 (<= 8 heads) or 2 (<= 16)
__global__ void __launch_bounds__(kThreads, 2) mla_decode_fp8_swap_kernel(const Params p) {
  constexpr int kLanesPerHead = 32 / NT;   // softmax: warp w owns heads NT w .. NT w + NT - 1
  extern __shared__ __align__(128) uint8_t smem[];
  const int split = blockIdx.x, b = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;
  const int mt = warp & 1, kq = warp >> 1;
  const int ctx = p.context_lens[b];
  const int tiles = (ctx + kTile32 - 1) / kTile32;
  const int per_split = (tiles + p.num_splits - 1) / p.num_splits;
  const int t_begin = min(tiles, split * per_split), t_end = min(tiles, t_begin + per_split);
  const int32_t* table = p.block_tables + size_t(b) * p.max_blocks;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (t_begin + s < t_end) fused_load_tile(p, fused_row_slot(p, table, ctx, t_begin + s), ctx, t_begin + s, smem, s);
    cp_async_commit();
  }
  uint32_t next_slot = t_begin + kStages - 1 < t_end ? fused_row_slot(p, table, ctx, t_begin + kStages - 1) : 0;

  float* part = reinterpret_cast<float*>(smem + kOffPart);
  uint8_t* pbuf = smem + kOffP;
  float* alpha_s = reinterpret_cast<float*>(smem + kOffAlpha);
  float* l_s = reinterpret_cast<float*>(smem + kOffL);
  const float* q_b = p.q + size_t(b) * p.heads * kMlaHeadDim;

  // q^T fragments (B operand) of this warp's k-steps kq + 4 i (32 dims = two
  // 16-dim chunks c), times softmax scale * log2 e * 2^64 in BF16: column g of
  // n-tile nt = head 8 nt + g; b0 = dims 16 c + 4 q4, +1, b1 = +2, +3, the
  // order in which the A operand decodes the stored bytes (the dot product
  // does not depend on the order of k).
  uint32_t qf[kKStepsPerWarp][NT][2][2];
  {
    const float s = p.q_scale * kFp8QBoost;
#pragma unroll
    for (int i = 0; i < kKStepsPerWarp; ++i)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int ks = kq + kKq * i, hl = 8 * nt + g;
          float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
          if (ks < kKSteps && hl < p.heads)
            x = __ldg(reinterpret_cast<const float4*>(q_b + size_t(hl) * kMlaHeadDim + 32 * ks + 16 * c + 4 * q4));
          qf[i][nt][c][0] = pack_bf16x2(x.x * s, x.y * s);
          qf[i][nt][c][1] = pack_bf16x2(x.z * s, x.w * s);
        }
  }

  // ldmatrix row addresses (stage-relative). Scores: lane l -> token
  // 16 mt + l % 8 + 8 (l / 8 % 2), chunk 2 ks + l / 16. Values: lane l -> token
  // l, chunk 4 warp + i (dims [64 warp, +64)).
  int k_off[kKStepsPerWarp];
  {
    const int tok = 16 * mt + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int i = 0; i < kKStepsPerWarp; ++i) {
      const int ks = min(kq + kKq * i, kKSteps - 1);
      k_off[i] = tok * kRowFp8 + fp8_pos(tok, 2 * ks + (lane >> 4)) * 16;
    }
  }
  int v_off[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v_off[i] = lane * kRowFp8 + fp8_pos(lane, 4 * warp + i) * 16;

  // Softmax ownership: head own_head, tokens NT own_j .. + NT - 1.
  const int own_head = NT * warp + lane / kLanesPerHead, own_j = lane % kLanesPerHead;
  float m_run = -INFINITY, l_part = 0.f;
  float o[4][NT][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) o[i][nt][0] = o[i][nt][1] = o[i][nt][2] = o[i][nt][3] = 0.f;

  // Partial scores of tile in stage `st` over this warp's k-steps -> part.
  auto scores = [&](int st) {
    const uint32_t base = smem_addr(smem + st * kStageBytes);
    float acc[NT][2][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int hl = 0; hl < 2; ++hl) acc[nt][hl][0] = acc[nt][hl][1] = acc[nt][hl][2] = acc[nt][hl][3] = 0.f;
#pragma unroll
    for (int i = 0; i < kKStepsPerWarp; ++i) {
      if (kq + kKq * i >= kKSteps) continue;  // warp-uniform: warps 4..7 have 4 k-steps
      uint32_t m[4];  // tokens 0-7 / 8-15 of the m-tile x chunks 2 ks, 2 ks + 1: bytes 4 q4 .. +3
      ldmatrix_x4(m, base + k_off[i]);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint32_t a[4] = {fp8x2<kBytes01>(m[2 * c]), fp8x2<kBytes01>(m[2 * c + 1]), fp8x2<kBytes23>(m[2 * c]),
                               fp8x2<kBytes23>(m[2 * c + 1])};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_bf16(acc[nt][c], a, qf[i][nt][c][0], qf[i][nt][c][1]);
      }
    }
    // c0, c1: token 16 mt + g, heads 2 q4, +1; c2, c3: token + 8.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float* dst = part + (kq * kHeads + 8 * nt + 2 * q4) * kPartStride + 16 * mt + g;
      dst[0] = acc[nt][0][0] + acc[nt][1][0];
      dst[kPartStride] = acc[nt][0][1] + acc[nt][1][1];
      dst[8] = acc[nt][0][2] + acc[nt][1][2];
      dst[kPartStride + 8] = acc[nt][0][3] + acc[nt][1][3];
    }
  };

  // Online softmax of tile t (stage st) -> P buffer pb and alpha_s[pb].
  auto softmax = [&](int t, int st, int pb) {
    const float* scale = reinterpret_cast<const float*>(smem + fused::kOffScale) + st * kTile32;
    float s[NT], sc[NT];
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      const int tok = NT * own_j + k;
      float acc = 0.f;
#pragma unroll
      for (int kk = 0; kk < kKq; ++kk) acc += part[(kk * kHeads + own_head) * kPartStride + tok];
      sc[k] = scale[tok];
      s[k] = t * kTile32 + tok < ctx ? acc * sc[k] * kFp8OutBoost : -INFINITY;
    }
    float mx = s[0];
#pragma unroll
    for (int k = 1; k < NT; ++k) mx = fmaxf(mx, s[k]);
#pragma unroll
    for (int k = 1; k < kLanesPerHead; k <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, k));
    const float m_new = fmaxf(m_run, mx);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = exp2f(m_run - m_use);
    m_run = m_new;
    float pr[NT], psum = 0.f;
#pragma unroll
    for (int k = 0; k < NT; ++k) pr[k] = exp2f(s[k] - m_use), psum += pr[k];
    l_part = l_part * alpha + psum;
    // P times the token's cache scale (V is decoded unscaled) and 2^64 (the
    // decode's 2^-120 and the output's 2^56), BF16.
    uint8_t* dst = pbuf + (pb * kHeads + own_head) * 2 * kTile32 + p_off(NT * own_j);
    if constexpr (NT == 2) {  // tokens 2 j, 2 j + 1: one word
      *reinterpret_cast<uint32_t*>(dst) = pack_bf16x2(pr[0] * sc[0] * kFp8QBoost, pr[NT - 1] * sc[NT - 1] * kFp8QBoost);
    } else {
      *reinterpret_cast<__nv_bfloat16*>(dst) = __float2bfloat16_rn(pr[0] * sc[0] * kFp8QBoost);
    }
    if (own_j == 0) alpha_s[pb * kHeads + own_head] = alpha;
  };

  // o = o * alpha + V^T . P^T of the tile in stage st (P buffer pb).
  auto values = [&](int st, int pb) {
    const uint32_t base = smem_addr(smem + st * kStageBytes);
    uint4 bp[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      bp[nt] = *reinterpret_cast<const uint4*>(pbuf + (pb * kHeads + 8 * nt + g) * 2 * kTile32 + 16 * q4);
    // Once the running maxima settle the factors are exactly 1: skip the
    // multiplies when all of the warp's are.
    float al[NT][2];
    bool all_one = true;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      al[nt][0] = alpha_s[pb * kHeads + 8 * nt + 2 * q4];
      al[nt][1] = alpha_s[pb * kHeads + 8 * nt + 2 * q4 + 1];
      all_one = all_one && al[nt][0] == 1.f && al[nt][1] == 1.f;
    }
    if (!__all_sync(0xffffffffu, all_one)) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          o[i][nt][0] *= al[nt][0], o[i][nt][1] *= al[nt][1], o[i][nt][2] *= al[nt][0], o[i][nt][3] *= al[nt][1];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, base + v_off[i]);
      // r[m]: tokens 8 m + 2 q4, +1 x dims 2 g, 2 g + 1 of the chunk (bytes d0 d1 d0 d1):
      // rows g / g + 8 of the A operand are dims 2 g / 2 g + 1, k = the two tokens.
#pragma unroll
      for (int kt = 0; kt < 2; ++kt) {
        const uint32_t a[4] = {fp8x2<kBytes02>(r[2 * kt]), fp8x2<kBytes13>(r[2 * kt]), fp8x2<kBytes02>(r[2 * kt + 1]),
                               fp8x2<kBytes13>(r[2 * kt + 1])};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma_bf16(o[i][nt], a, kt == 0 ? bp[nt].x : bp[nt].z, kt == 0 ? bp[nt].y : bp[nt].w);
      }
    }
  };

  if (t_begin < t_end) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t_begin landed
    scores(0);
    __syncthreads();
    softmax(t_begin, 0, 0);
  }
  int st = 0;  // stage of tile t
  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    const int st_next = st + 1 == kStages ? 0 : st + 1;
    cp_async_wait<kStages - 3>();
    __syncthreads();  // tile t+1 landed; softmax(t) written; values(t-1) done with its stage and P buffer
    if (t + kStages - 1 < t_end) {
      fused_load_tile(p, next_slot, ctx, t + kStages - 1, smem, st == 0 ? kStages - 1 : st - 1);
      if (t + kStages < t_end) next_slot = fused_row_slot(p, table, ctx, t + kStages);
    }
    cp_async_commit();
    if (t + 1 < t_end) scores(st_next);
    if (!(p.profile_skip & kMlaSkipValues)) values(st, it & 1);
    __syncthreads();  // partial scores of t+1 written
    if (t + 1 < t_end) softmax(t + 1, st_next, (it + 1) & 1);
    st = st_next;
  }
  cp_async_wait<0>();

  // ---- row sums; normalize; write ----
  float l = l_part;
#pragma unroll
  for (int k = 1; k < kLanesPerHead; k <<= 1) l += __shfl_xor_sync(0xffffffffu, l, k);
  if (own_j == 0) {
    l_s[own_head] = l;
    if (p.num_splits > 1 && own_head < p.heads)
      p.ws_lse[(size_t(split) * p.batch + b) * p.heads + own_head] = l > 0.f ? m_run + log2f(l) : -INFINITY;
  }
  __syncthreads();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int h = 8 * nt + 2 * q4 + hh;
      if (h >= p.heads) continue;
      const float lh = l_s[h];
      const float inv = lh > 0.f ? kFp8OutBoost / lh : 0.f;
      float* dst = p.num_splits == 1 ? p.out + (size_t(b) * p.heads + h) * kMlaValueDim
                                     : p.ws_o + ((size_t(split) * p.batch + b) * p.heads + h) * kMlaValueDim;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // Rows g, g + 8 of m-tile i are dims 2 g, 2 g + 1 of chunk 4 warp + i.
        const int d = 16 * (4 * warp + i) + 2 * g;
        *reinterpret_cast<float2*>(dst + d) = make_float2(o[i][nt][hh] * inv, o[i][nt][2 + hh] * inv);
      }
    }
}

template <int NT>
cudaError_t launch_nt(const Params& p, cudaStream_t stream) {
  static std::atomic<uint64_t> done{0};
  const cudaError_t attr =
      ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_fp8_swap_kernel<NT>), kBytes, true);
  if (attr != cudaSuccess) return attr;
  mla_decode_fp8_swap_kernel<NT><<<dim3(p.num_splits, p.batch, 1), kThreads, kBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_swap(const Params& p, cudaStream_t stream) {
  return p.heads <= 8 ? launch_nt<1>(p, stream) : launch_nt<2>(p, stream);
}

}  // namespace mx::cuda::mla
