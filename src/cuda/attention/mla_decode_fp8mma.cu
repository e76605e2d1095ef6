// The FP8 tensor-core MLA decode kernel (heads <= 16): both products on
// mma.m16n8k32 e4m3 with the operands swapped (tokens / dims as M, heads as
// N), q and P as two E4M3 terms each. Its design is described beside its
// constants in mla_decode_common.cuh (namespace fp8mma).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/attention/mla_decode_common.cuh"

namespace mx::cuda::mla {
namespace {

using fp8mma::kHeads, fp8mma::kKq, fp8mma::kKSteps, fp8mma::kKStepsPerWarp, fp8mma::kPartStride, fp8mma::kPBoost,
    fp8mma::kOffPart, fp8mma::kOffP, fp8mma::kOffAlpha, fp8mma::kOffL, fp8mma::kOffQScale, fp8mma::kBytes,
    fp8mma::kStages;
using fused::kStageBytes;
constexpr int kTile32 = fp8mma::kTile;  // not mla::kTile (64, the tiled kernel's)

__device__ __forceinline__ void mma_e4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t prmt2(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// Two floats -> E4M3 x2 (x in the low byte), saturating.
__device__ __forceinline__ uint32_t e4m3x2(float x, float y) {
  return __nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float2 e4m3x2_value(uint32_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v), __NV_E4M3);
  return __half22float2(__half2(h));
}
// x, y -> hi = E4M3 x2 of (x, y), lo = E4M3 x2 of what hi left out.
__device__ __forceinline__ void split_e4m3x2(float x, float y, uint32_t& hi, uint32_t& lo) {
  hi = e4m3x2(x, y);
  const float2 h = e4m3x2_value(hi);
  lo = e4m3x2(x - h.x, y - h.y);
}

// Byte of token t (0..31) in a P row: the order of the k slots of the value
// mma's A operand (slot 4 q + j of half hf holds token 16 hf + 2 q + j % 2 +
// 8 (j / 2)), stored so that a lane's two B registers (slots 4 q4.., 16 + 4 q4..)
// are one 8-byte load at 8 q4.
__device__ __forceinline__ int p_byte(int t) {
  const int r = t & 15;
  return 8 * ((r & 7) >> 1) + 4 * (t >> 4) + (r & 1) + 2 * (r >> 3);
}

template <int NT>  // n-tiles of 8 heads: 1 (<= 8 heads) or 2 (<= 16)
__global__ void __launch_bounds__(kThreads, 2) mla_decode_fp8_mma_kernel(const Params p) {
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
  float* qmul_s = reinterpret_cast<float*>(smem + kOffQScale);  // [16] 2^k, then [16] 2^-k
  const float* q_b = p.q + size_t(b) * p.heads * kMlaHeadDim;

  // ---- per-head power-of-two q scale: max |q * q_scale| * 2^k in [128, 256) ----
#pragma unroll
  for (int hh = 0; hh < NT; ++hh) {
    const int hl = NT * warp + hh;
    float amax = 0.f;
    if (hl < p.heads) {
      const float4* row = reinterpret_cast<const float4*>(q_b + size_t(hl) * kMlaHeadDim);
      for (int j = lane; j < kMlaHeadDim / 4; j += 32) {
        const float4 v = __ldg(row + j);
        amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
      }
    }
#pragma unroll
    for (int k = 1; k < 32; k <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, k));
    if (lane == 0) {
      const float a = amax * fabsf(p.q_scale);
      int e = 0;
      frexpf(a, &e);  // a = f 2^e, f in [0.5, 1)
      const int k = a > 0.f && a < INFINITY ? min(100, max(-100, 8 - e)) : 0;
      qmul_s[hl] = ldexpf(1.f, k);
      qmul_s[kHeads + hl] = ldexpf(1.f, -k);
    }
  }
  __syncthreads();

  // q^T fragments (B operand) of this warp's k-steps kq + 4 i, hi and lo terms:
  // column g of n-tile nt = head 8 nt + g; b0 = dims 32 ks + 4 q4 .. +3, b1 = +16.
  uint32_t qf[kKStepsPerWarp][NT][2][2];
#pragma unroll
  for (int i = 0; i < kKStepsPerWarp; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int ks = kq + kKq * i, hl = 8 * nt + g;
      float4 x0 = make_float4(0.f, 0.f, 0.f, 0.f), x1 = x0;
      if (ks < kKSteps && hl < p.heads) {
        const float* row = q_b + size_t(hl) * kMlaHeadDim + 32 * ks + 4 * q4;
        x0 = __ldg(reinterpret_cast<const float4*>(row));
        x1 = __ldg(reinterpret_cast<const float4*>(row + 16));
      }
      const float s = p.q_scale * qmul_s[hl];
      uint32_t h0, l0, h1, l1;
      split_e4m3x2(x0.x * s, x0.y * s, h0, l0);
      split_e4m3x2(x0.z * s, x0.w * s, h1, l1);
      qf[i][nt][0][0] = h0 | (h1 << 16), qf[i][nt][1][0] = l0 | (l1 << 16);
      split_e4m3x2(x1.x * s, x1.y * s, h0, l0);
      split_e4m3x2(x1.z * s, x1.w * s, h1, l1);
      qf[i][nt][0][1] = h0 | (h1 << 16), qf[i][nt][1][1] = l0 | (l1 << 16);
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
  const float own_qinv = qmul_s[kHeads + own_head];
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
      uint32_t a[4];
      ldmatrix_x4(a, base + k_off[i]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        mma_e4m3(acc[nt][0], a, qf[i][nt][0][0], qf[i][nt][0][1]);
        mma_e4m3(acc[nt][1], a, qf[i][nt][1][0], qf[i][nt][1][1]);
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
    float s[NT], u[NT];
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      const int tok = NT * own_j + k;
      float acc = 0.f;
#pragma unroll
      for (int kk = 0; kk < kKq; ++kk) acc += part[(kk * kHeads + own_head) * kPartStride + tok];
      const float sc = scale[tok];
      const bool valid = t * kTile32 + tok < ctx;
      s[k] = valid ? acc * own_qinv * sc : -INFINITY;
      u[k] = valid ? s[k] + __log2f(sc) : -INFINITY;
    }
    float mx = u[0];
#pragma unroll
    for (int k = 1; k < NT; ++k) mx = fmaxf(mx, u[k]);
#pragma unroll
    for (int k = 1; k < kLanesPerHead; k <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, k));
    const float m_new = fmaxf(m_run, mx);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = exp2f(m_run - m_use);
    m_run = m_new;
    float w[NT], psum = 0.f;
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      w[k] = exp2f(u[k] - m_use) * kPBoost;  // weight times the token's cache scale, <= 256
      psum += exp2f(s[k] - m_use);           // probability, for the denominator
    }
    l_part = l_part * alpha + psum;
    uint32_t hi, lo;
    split_e4m3x2(w[0], NT == 2 ? w[NT - 1] : 0.f, hi, lo);
    uint8_t* row_hi = pbuf + ((pb * 2 + 0) * kHeads + own_head) * kTile32 + p_byte(NT * own_j);
    uint8_t* row_lo = row_hi + kHeads * kTile32;
    if constexpr (NT == 2) {  // tokens 2 j, 2 j + 1 are adjacent bytes
      *reinterpret_cast<uint16_t*>(row_hi) = uint16_t(hi);
      *reinterpret_cast<uint16_t*>(row_lo) = uint16_t(lo);
    } else {
      *row_hi = uint8_t(hi);
      *row_lo = uint8_t(lo);
    }
    if (own_j == 0) alpha_s[pb * kHeads + own_head] = alpha;
  };

  // o = o * alpha + V^T . P^T of tile in stage st (P buffer pb).
  auto values = [&](int st, int pb) {
    const uint32_t base = smem_addr(smem + st * kStageBytes);
    uint32_t bf[NT][2][2];
    float al[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int hl = 0; hl < 2; ++hl) {
        const uint2 v = *reinterpret_cast<const uint2*>(pbuf + ((pb * 2 + hl) * kHeads + 8 * nt + g) * kTile32 + 8 * q4);
        bf[nt][hl][0] = v.x, bf[nt][hl][1] = v.y;
      }
      al[nt][0] = alpha_s[pb * kHeads + 8 * nt + 2 * q4];
      al[nt][1] = alpha_s[pb * kHeads + 8 * nt + 2 * q4 + 1];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, base + v_off[i]);
      // r[m]: tokens 8 m + 2 q4, +1 x dims 2 g, 2 g + 1 of the chunk (bytes d0 d1 d0 d1).
      const uint32_t a[4] = {prmt2(r[0], r[1], 0x6420), prmt2(r[0], r[1], 0x7531), prmt2(r[2], r[3], 0x6420),
                             prmt2(r[2], r[3], 0x7531)};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        mma_e4m3(c, a, bf[nt][0][0], bf[nt][0][1]);
        mma_e4m3(c, a, bf[nt][1][0], bf[nt][1][1]);
        o[i][nt][0] = fmaf(o[i][nt][0], al[nt][0], c[0]);
        o[i][nt][1] = fmaf(o[i][nt][1], al[nt][1], c[1]);
        o[i][nt][2] = fmaf(o[i][nt][2], al[nt][0], c[2]);
        o[i][nt][3] = fmaf(o[i][nt][3], al[nt][1], c[3]);
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
      const float inv = lh > 0.f ? 1.f / (kPBoost * lh) : 0.f;
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
      ensure_smem_limit(done, reinterpret_cast<const void*>(mla_decode_fp8_mma_kernel<NT>), kBytes, true);
  if (attr != cudaSuccess) return attr;
  mla_decode_fp8_mma_kernel<NT><<<dim3(p.num_splits, p.batch, 1), kThreads, kBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fp8mma(const Params& p, cudaStream_t stream) {
  return p.heads <= 8 ? launch_nt<1>(p, stream) : launch_nt<2>(p, stream);
}

}  // namespace mx::cuda::mla
