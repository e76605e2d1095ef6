// FlashAttention-2-style causal attention on the tensor cores (mma.sync
// m16n8k16 BF16 -> F32), for prefill and chunked prefill against a cached
// prefix, paged or dense. A block of 4 warps owns 64 query rows of one
// sequence and one q head (16 rows a warp, Q held in registers as A
// fragments); it walks 64-key tiles up to the last row's causal limit:
//   K tile -> smem [key][dk] BF16, V tile -> smem transposed [dv][key] BF16,
//   S = Q K^T (F32), causal mask, online softmax in registers (a row lives in
//   one quad of lanes), P rounded to BF16 and fed straight from the S
//   accumulators as the A operand of O += P V.
// FP8 caches: E4M3 values are exact in BF16, so K and V enter unscaled; the
// key's scale multiplies its score column and the value's scale its P column.
// Every other dtype is rounded to BF16 once on its way into shared memory.
#include <cfloat>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"

namespace mx::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kKeys = 64;            // keys per tile
constexpr int kPad = 8;              // BF16 elements of padding per smem row (bank spread)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kMaskedRowMax = -1e30f;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two consecutive elements of a KV row as floats (unscaled for FP8).
template <KvType T>
__device__ __forceinline__ float2 kv_load2(const void* data, int64_t index) {
  if constexpr (T == KvType::F32) {
    return *reinterpret_cast<const float2*>(static_cast<const float*>(data) + index);
  } else if constexpr (T == KvType::BF16) {
    const uint32_t bits = *reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(data) + index);
    return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
  } else {
    const uint16_t bits = *reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(data) + index);
    return make_float2(fp8_to_f32(uint8_t(bits & 0xff)), fp8_to_f32(uint8_t(bits >> 8)));
  }
}

template <int DK, int DV>
struct Layout {
  static constexpr int kStride = DK + kPad;   // K smem row (BF16 elements)
  static constexpr int vStride = kKeys + kPad;  // Vt smem row
  static constexpr size_t bytes = sizeof(uint16_t) * (size_t(kKeys) * kStride + size_t(DV) * vStride) +
                                  sizeof(int64_t) * kKeys + 2 * sizeof(float) * kKeys;
};

template <int DK, int DV, KvType T>
__global__ void __launch_bounds__(kThreads) tensor_core_attention_kernel(AttentionArgs a) {
  using L = Layout<DK, DV>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* k_s = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* vt_s = k_s + kKeys * L::kStride;
  int64_t* rows_s = reinterpret_cast<int64_t*>(vt_s + DV * L::vStride);
  float* kscale_s = reinterpret_cast<float*>(rows_s + kKeys);
  float* vscale_s = kscale_s + kKeys;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, tq = lane % 4;
  int seq = 0, row0 = blockIdx.x * kQueryTile;
  if (a.seqs.q_tiles) seq = a.seqs.q_tiles[2 * blockIdx.x], row0 = a.seqs.q_tiles[2 * blockIdx.x + 1];
  const SeqInfo info = seq_info(a.seqs, seq);
  const int h = blockIdx.y, kh = h / (a.q_heads / a.k.heads);
  const int last_row = min(row0 + kQueryTile, info.num_new) - 1;
  const int hi = info.num_cached + last_row + 1;  // keys any row of the tile sees
  // This thread's two rows (g and g + 8 of the warp's 16) and their key limits.
  int row_i[2], limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_i[r] = row0 + warp * 16 + g + 8 * r;
    limit[r] = row_i[r] < info.num_new ? info.num_cached + row_i[r] + 1 : 0;
  }

  // Q fragments: A operand of m16n8k16, rows g / g + 8, dims 2tq.. of each 16.
  uint32_t qf[DK / 16][4];
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float2 lo = make_float2(0.f, 0.f), hi2 = make_float2(0.f, 0.f);
      if (row_i[r] < info.num_new) {
        const float* q = a.q + (int64_t(info.q_begin + row_i[r]) * a.q_heads + h) * DK + kk * 16 + 2 * tq;
        lo = *reinterpret_cast<const float2*>(q);
        hi2 = *reinterpret_cast<const float2*>(q + 8);
      }
      qf[kk][r] = pack_bf16(lo.x, lo.y);
      qf[kk][2 + r] = pack_bf16(hi2.x, hi2.y);
    }
  }

  float o[DV / 8][4];
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kMaskedRowMax, kMaskedRowMax}, l[2] = {0.f, 0.f};
  const float qk_scale = a.scale * kLog2e;

  for (int start = 0; start < hi; start += kKeys) {
    const int n_keys = min(kKeys, hi - start);
    if (tid < kKeys) {
      const bool in = tid < n_keys;
      const int64_t row = in ? kv_row(a.seqs, seq, start + tid) : 0;
      rows_s[tid] = row;
      kscale_s[tid] = (T == KvType::FP8 && in) ? a.k.scale[row] : 1.0f;
      vscale_s[tid] = (T == KvType::FP8 && in) ? a.v.scale[row] : 1.0f;
    }
    __syncthreads();
    for (int idx = tid; idx < kKeys * DK / 2; idx += kThreads) {
      const int key = idx / (DK / 2), d = 2 * (idx % (DK / 2));
      float2 x = make_float2(0.f, 0.f);
      if (key < n_keys) x = kv_load2<T>(a.k.data, rows_s[key] * a.k.row_stride + int64_t(kh) * a.k.head_stride + d);
      *reinterpret_cast<uint32_t*>(k_s + key * L::kStride + d) = pack_bf16(x.x, x.y);
    }
    for (int idx = tid; idx < kKeys * DV / 2; idx += kThreads) {
      const int key = idx / (DV / 2), c = 2 * (idx % (DV / 2));
      float2 x = make_float2(0.f, 0.f);
      if (key < n_keys) x = kv_load2<T>(a.v.data, rows_s[key] * a.v.row_stride + int64_t(kh) * a.v.head_stride + c);
      const uint32_t p = pack_bf16(x.x, x.y);
      vt_s[c * L::vStride + key] = uint16_t(p & 0xffff);
      vt_s[(c + 1) * L::vStride + key] = uint16_t(p >> 16);
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      const uint16_t* krow = k_s + (nt * 8 + g) * L::kStride + 2 * tq;
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8);
        mma_bf16(s[nt], qf[kk], b0, b1);
      }
    }
    // Scale, mask, online softmax (log2 domain). Element e of s[nt] is row
    // g + 8 * (e / 2), key nt * 8 + 2 * tq + e % 2.
    float tile_max[2] = {kMaskedRowMax, kMaskedRowMax};
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = nt * 8 + 2 * tq + (e % 2), r = e / 2;
        const bool visible = start + key < limit[r] && key < n_keys;
        s[nt][e] = visible ? s[nt][e] * qk_scale * kscale_s[key] : -INFINITY;
        tile_max[r] = fmaxf(tile_max[r], s[nt][e]);
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      alpha[r] = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0];
      o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
    // P (F32 sums, BF16 operands; FP8: the value scale folded into P).
    uint32_t pf[kKeys / 16][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[nt][e] - m[e / 2]);
        l[e / 2] += p[e];
        if constexpr (T == KvType::FP8) p[e] *= vscale_s[nt * 8 + 2 * tq + (e % 2)];
      }
      pf[nt / 2][(nt % 2) * 2 + 0] = pack_bf16(p[0], p[1]);
      pf[nt / 2][(nt % 2) * 2 + 1] = pack_bf16(p[2], p[3]);
    }
    // O += P V: A = P (rows x 16 keys), B = V (16 keys x 8 dims) from Vt.
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      const uint16_t* vrow = vt_s + (n * 8 + g) * L::vStride + 2 * tq;
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(vrow + kk * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(vrow + kk * 16 + 8);
        mma_bf16(o[n], pf[kk], b0, b1);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row_i[r] >= info.num_new) continue;
    const float inv = 1.0f / l[r];
    float* out = a.out + (int64_t(info.q_begin + row_i[r]) * a.q_heads + h) * DV + 2 * tq;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      *reinterpret_cast<float2*>(out + n * 8) = make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
  }
}

template <int DK, int DV, KvType T>
void launch_shape(const AttentionArgs& a, cudaStream_t stream) {
  auto kernel = tensor_core_attention_kernel<DK, DV, T>;
  const size_t smem = Layout<DK, DV>::bytes;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  const int tiles = a.seqs.q_tiles ? a.seqs.num_q_tiles : (a.seqs.single_new + kQueryTile - 1) / kQueryTile;
  if (tiles == 0) return;
  kernel<<<dim3(unsigned(tiles), unsigned(a.q_heads)), kThreads, smem, stream>>>(a);
}

template <int DK, int DV>
void launch_dims(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.k.type) {
    case KvType::F32: return launch_shape<DK, DV, KvType::F32>(a, stream);
    case KvType::BF16: return launch_shape<DK, DV, KvType::BF16>(a, stream);
    case KvType::FP8: return launch_shape<DK, DV, KvType::FP8>(a, stream);
  }
}

}  // namespace

bool tensor_core_attention_supports(int k_dim, int v_dim) {
  return (k_dim == v_dim && (k_dim == 32 || k_dim == 64 || k_dim == 128)) || (k_dim == 192 && v_dim == 128);
}

void launch_tensor_core_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.k.dim == 32 && a.v.dim == 32) return launch_dims<32, 32>(a, stream);
  if (a.k.dim == 64 && a.v.dim == 64) return launch_dims<64, 64>(a, stream);
  if (a.k.dim == 128 && a.v.dim == 128) return launch_dims<128, 128>(a, stream);
  if (a.k.dim == 192 && a.v.dim == 128) return launch_dims<192, 128>(a, stream);
}

}  // namespace mx::cuda
