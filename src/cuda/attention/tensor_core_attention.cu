// FlashAttention-2-style causal attention on the tensor cores (mma.sync
// m16n8k16 BF16 -> F32), for prefill and chunked prefill against a cached
// prefix, paged or dense. A block of 4 warps owns 64 query rows of one
// sequence and one q head (16 rows a warp, Q held in registers as A
// fragments); it walks 64-key tiles up to the last row's causal limit:
//   K tile -> smem [key][dk] BF16, V tile -> smem [key][dv] BF16,
//   S = Q K^T (F32), causal mask, online softmax in registers (a row lives in
//   one quad of lanes), P rounded to BF16 and fed straight from the S
//   accumulators as the A operand of O += P V (V fragments by ldmatrix.trans).
// BF16 sources (BF16 caches; dense F32 inputs are converted to BF16 first)
// are copied with cp.async into two smem stages, the next tile in flight while
// the current one is computed. F32 and FP8 caches are converted on the way in
// (one stage); FP8 E4M3 values are exact in BF16, so K and V enter unscaled:
// the key's scale multiplies its score column and the value's scale its P
// column.
#include <algorithm>
#include <cfloat>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"

namespace mx::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kKeys = 64;            // keys per tile
constexpr int kPad = 8;              // BF16 elements of padding per smem row (bank spread, 16-byte rows)
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

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16 bytes global -> shared, asynchronously; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* global, int src_bytes) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(global), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Eight consecutive elements of a KV row as BF16 (unscaled for FP8).
template <KvType T>
__device__ __forceinline__ uint4 kv_load8_bf16(const void* data, int64_t index) {
  if constexpr (T == KvType::BF16) {
    return *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(data) + index);
  } else if constexpr (T == KvType::F32) {
    const float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(data) + index);
    const float4 y = *reinterpret_cast<const float4*>(static_cast<const float*>(data) + index + 4);
    return make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y), pack_bf16(y.z, y.w));
  } else {
    const uint2 b = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(data) + index);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = i < 2 ? b.x : b.y, shift = 16 * (i % 2);
      w[i] = pack_bf16(fp8_to_f32(uint8_t(word >> shift)), fp8_to_f32(uint8_t(word >> (shift + 8))));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <int DK, int DV, KvType T>
struct Layout {
  static constexpr bool kAsync = T == KvType::BF16;
  static constexpr int kStages = kAsync ? 2 : 1;
  static constexpr int kStride = DK + kPad;  // K smem row (BF16 elements)
  static constexpr int vStride = DV + kPad;  // V smem row
  static constexpr int kStage = kKeys * (kStride + vStride);  // BF16 elements of one stage
  static constexpr size_t bytes = sizeof(uint16_t) * size_t(kStages) * kStage + 2 * sizeof(float) * kKeys;
};

struct TileSource {
  const AttentionArgs* a;
  int seq, kh;
};

// Issues the cp.async copies of keys [start, start + n_keys) of K and V into
// one stage (zeros past n_keys).
template <int DK, int DV>
__device__ __forceinline__ void load_tile_async(const TileSource& src, int start, int n_keys, uint16_t* k_s,
                                                uint16_t* v_s) {
  const AttentionArgs& a = *src.a;
  constexpr int kChunks = DK / 8, vChunks = DV / 8;
  for (int c = threadIdx.x; c < kKeys * (kChunks + vChunks); c += kThreads) {
    const bool is_k = c < kKeys * kChunks;
    const int cc = is_k ? c : c - kKeys * kChunks, per_row = is_k ? kChunks : vChunks;
    const int key = cc / per_row, part = cc % per_row;
    const bool in = key < n_keys;
    const int64_t row = in ? kv_row(a.seqs, src.seq, start + key) : 0;
    const KvView& view = is_k ? a.k : a.v;
    const uint16_t* g = static_cast<const uint16_t*>(view.data) + row * view.row_stride +
                        int64_t(src.kh) * view.head_stride + part * 8;
    uint16_t* s = is_k ? k_s + key * (DK + kPad) + part * 8 : v_s + key * (DV + kPad) + part * 8;
    cp_async16(s, g, in ? 16 : 0);
  }
}

// The same tile through registers (F32 and FP8 sources), with the FP8 scales.
template <int DK, int DV, KvType T>
__device__ __forceinline__ void load_tile_sync(const TileSource& src, int start, int n_keys, uint16_t* k_s,
                                               uint16_t* v_s, float* kscale_s, float* vscale_s) {
  const AttentionArgs& a = *src.a;
  if (threadIdx.x < kKeys) {
    const bool in = threadIdx.x < n_keys;
    const int64_t row = in ? kv_row(a.seqs, src.seq, start + threadIdx.x) : 0;
    kscale_s[threadIdx.x] = (T == KvType::FP8 && in) ? a.k.scale[row] : 1.0f;
    vscale_s[threadIdx.x] = (T == KvType::FP8 && in) ? a.v.scale[row] : 1.0f;
  }
  constexpr int kChunks = DK / 8, vChunks = DV / 8;
  for (int c = threadIdx.x; c < kKeys * (kChunks + vChunks); c += kThreads) {
    const bool is_k = c < kKeys * kChunks;
    const int cc = is_k ? c : c - kKeys * kChunks, per_row = is_k ? kChunks : vChunks;
    const int key = cc / per_row, part = cc % per_row;
    const KvView& view = is_k ? a.k : a.v;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key < n_keys) {
      const int64_t row = kv_row(a.seqs, src.seq, start + key);
      x = kv_load8_bf16<T>(view.data, row * view.row_stride + int64_t(src.kh) * view.head_stride + part * 8);
    }
    uint16_t* s = is_k ? k_s + key * (DK + kPad) + part * 8 : v_s + key * (DV + kPad) + part * 8;
    *reinterpret_cast<uint4*>(s) = x;
  }
}

template <int DK, int DV, KvType T>
__global__ void __launch_bounds__(kThreads) tensor_core_attention_kernel(AttentionArgs a) {
  using L = Layout<DK, DV, T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* stage_base = reinterpret_cast<uint16_t*>(smem_raw);
  float* kscale_s = reinterpret_cast<float*>(stage_base + L::kStages * L::kStage);
  float* vscale_s = kscale_s + kKeys;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, tq = lane % 4;
  int seq = 0, row0 = blockIdx.x * kQueryTile;
  if (a.seqs.q_tiles) seq = a.seqs.q_tiles[2 * blockIdx.x], row0 = a.seqs.q_tiles[2 * blockIdx.x + 1];
  const SeqInfo info = seq_info(a.seqs, seq);
  const int h = blockIdx.y, kh = h / (a.q_heads / a.k.heads);
  const TileSource src{&a, seq, kh};
  const int last_row = min(row0 + kQueryTile, info.num_new) - 1;
  const int hi = info.num_cached + last_row + 1;  // keys any row of the tile sees
  const int num_tiles = (hi + kKeys - 1) / kKeys;
  // This thread's two rows (g and g + 8 of the warp's 16) and their key limits.
  int row_i[2], limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_i[r] = row0 + warp * 16 + g + 8 * r;
    limit[r] = row_i[r] < info.num_new ? info.num_cached + row_i[r] + 1 : 0;
  }
  if constexpr (L::kAsync) {
    load_tile_async<DK, DV>(src, 0, min(kKeys, hi), stage_base, stage_base + kKeys * L::kStride);
    cp_async_commit();
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

  for (int t = 0; t < num_tiles; ++t) {
    const int start = t * kKeys, n_keys = min(kKeys, hi - start);
    uint16_t* k_s = stage_base + (t % L::kStages) * L::kStage;
    uint16_t* v_s = k_s + kKeys * L::kStride;
    if constexpr (L::kAsync) {
      if (t + 1 < num_tiles) {
        uint16_t* k_next = stage_base + ((t + 1) % L::kStages) * L::kStage;
        load_tile_async<DK, DV>(src, start + kKeys, min(kKeys, hi - start - kKeys), k_next, k_next + kKeys * L::kStride);
      }
      cp_async_commit();
      cp_async_wait<1>();  // every group but the newest: tile t has landed
    } else {
      load_tile_sync<DK, DV, T>(src, start, n_keys, k_s, v_s, kscale_s, vscale_s);
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
        const float key_scale = L::kAsync ? 1.0f : kscale_s[key];
        s[nt][e] = visible ? s[nt][e] * qk_scale * key_scale : -INFINITY;
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
    // O += P V. ldmatrix.trans of four 8x8 blocks of V [key][dv]: keys
    // kk*16 + {0-7, 8-15} x dims n*8 and (n+1)*8 give the B fragments
    // (b0, b1) of n-tiles n and n + 1; lane L addresses row L % 8 of block L / 8.
    const int blk = lane / 8, key_in = (blk % 2) * 8 + lane % 8, dim_in = (blk / 2) * 8;
#pragma unroll
    for (int n = 0; n < DV / 8; n += 2) {
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_s + (kk * 16 + key_in) * L::vStride + n * 8 + dim_in);
        mma_bf16(o[n], pf[kk], b[0], b[1]);
        mma_bf16(o[n + 1], pf[kk], b[2], b[3]);
      }
    }
    __syncthreads();  // the stage is refilled next iteration
  }
  if constexpr (L::kAsync) cp_async_wait<0>();

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

__global__ void f32_to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(x[i]);
}

template <int DK, int DV, KvType T>
void launch_shape(const AttentionArgs& a, cudaStream_t stream) {
  auto kernel = tensor_core_attention_kernel<DK, DV, T>;
  const size_t smem = Layout<DK, DV, T>::bytes;
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

void launch_f32_to_bf16_rows(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  f32_to_bf16_kernel<<<unsigned(blocks), 256, 0, stream>>>(x, n, reinterpret_cast<__nv_bfloat16*>(out));
}

void launch_tensor_core_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.k.dim == 32 && a.v.dim == 32) return launch_dims<32, 32>(a, stream);
  if (a.k.dim == 64 && a.v.dim == 64) return launch_dims<64, 64>(a, stream);
  if (a.k.dim == 128 && a.v.dim == 128) return launch_dims<128, 128>(a, stream);
  if (a.k.dim == 192 && a.v.dim == 128) return launch_dims<192, 128>(a, stream);
}

}  // namespace mx::cuda
