// Attention for any head dims (v.dim <= 512) on CUDA cores, F32 throughout:
// the correct-for-every-shape path (MLA absorbed decode over the 576-wide
// latent, odd synthetic dims) and the decode path, where it is bound by
// reading the cache. A block serves one query row and up to kHeads q heads of
// one KV head, so each cached row is read once for the whole group (GQA) or
// for 8 heads at a time (MLA's single latent head). Keys go in tiles of kTile:
//   scores  (a warp per 4 keys, lanes over dims; each key's 8 partial dots
//            are reduce-scattered over the warp in 9 shuffles),
//   softmax (online: running max m and sum l per head),
//   values  (a thread per output dim, each value read once for the 8 heads).
// With num_splits > 1 each row's keys are cut into ranges whose partial
// (o, m, l) go to a workspace and are merged by combine_kernel.
#include <cfloat>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"

namespace mx::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kHeads = 8;
constexpr int kTile = 64;
constexpr int kKeysPerWarp = 4;

struct Smem {
  float* q;         // [kHeads, dk]
  float* p;         // [kHeads, kTile] scores, then softmax weights
  int64_t* rows;    // [kTile] cache rows of the tile's keys
  float* k_scale;   // [kTile]
  float* v_scale;   // [kTile]
  float* m;         // [kHeads]
  float* l;         // [kHeads]
  float* alpha;     // [kHeads]
};

size_t smem_bytes(int dk) {
  return sizeof(float) * (size_t(kHeads) * dk + kHeads * kTile + 2 * kTile + 3 * kHeads) + sizeof(int64_t) * kTile;
}

__device__ Smem carve(unsigned char* base, int dk) {
  Smem s;
  s.rows = reinterpret_cast<int64_t*>(base);
  float* f = reinterpret_cast<float*>(base + sizeof(int64_t) * kTile);
  s.q = f, f += kHeads * dk;
  s.p = f, f += kHeads * kTile;
  s.k_scale = f, f += kTile;
  s.v_scale = f, f += kTile;
  s.m = f, f += kHeads;
  s.l = f, f += kHeads;
  s.alpha = f;
  return s;
}

// After the call, lane L holds the warp-wide sum of v[(L >> 2) & 7].
__device__ __forceinline__ float reduce_scatter8(float v[kHeads], int lane) {
#pragma unroll
  for (int half = 4, bit = 16; half >= 1; half /= 2, bit /= 2) {
    const bool upper = lane & bit;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? v[i] : v[i + half];
      const float keep = upper ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, bit);
    }
  }
  float r = v[0];
  r += __shfl_xor_sync(0xffffffffu, r, 2);
  r += __shfl_xor_sync(0xffffffffu, r, 1);
  return r;
}

template <KvType T, int NC>
__global__ void __launch_bounds__(kThreads) generic_attention_kernel(AttentionArgs a, int num_splits, int split_len,
                                                                     float* ws_o, float* ws_ml) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int dk = a.k.dim, dv = a.v.dim;
  Smem sm = carve(smem_raw, dk);
  const int t = blockIdx.x, split = blockIdx.z;
  const int seq = !a.seqs.token_seq ? 0 : t < a.seqs.num_rows ? a.seqs.token_seq[t] : -1;
  if (seq < 0) return;  // a row no sequence owns (the output was zeroed)
  const SeqInfo info = seq_info(a.seqs, seq);
  const int visible = info.num_cached + (t - info.q_begin) + 1;
  const int group = a.q_heads / a.k.heads, chunks = (group + kHeads - 1) / kHeads;
  const int kh = blockIdx.y / chunks, h0 = kh * group + (blockIdx.y % chunks) * kHeads;
  const int hg = min(kHeads, kh * group + group - h0);
  const int lo = split * split_len, hi = min(visible, lo + split_len);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  for (int i = tid; i < kHeads * dk; i += kThreads) {
    const int h = i / dk, d = i % dk;
    sm.q[i] = h < hg ? a.q[(int64_t(t) * a.q_heads + h0 + h) * dk + d] : 0.0f;
  }
  if (tid < kHeads) sm.m[tid] = -FLT_MAX, sm.l[tid] = 0.0f;
  float o[NC][kHeads];
#pragma unroll
  for (int c = 0; c < NC; ++c)
#pragma unroll
    for (int h = 0; h < kHeads; ++h) o[c][h] = 0.0f;
  __syncthreads();

  for (int start = lo; start < hi; start += kTile) {
    const int n = min(kTile, hi - start);
    if (tid < n) {
      const int64_t row = kv_row(a.seqs, seq, start + tid);
      sm.rows[tid] = row;
      sm.k_scale[tid] = T == KvType::FP8 ? a.k.scale[row] : 1.0f;
      sm.v_scale[tid] = T == KvType::FP8 ? a.v.scale[row] : 1.0f;
    }
    __syncthreads();
    // A warp takes kKeysPerWarp keys at once so that many loads are in flight.
    for (int jb = warp * kKeysPerWarp; jb < n; jb += kWarps * kKeysPerWarp) {
      int64_t base[kKeysPerWarp];
      float acc[kKeysPerWarp][kHeads];
#pragma unroll
      for (int u = 0; u < kKeysPerWarp; ++u) {
        base[u] = sm.rows[min(jb + u, n - 1)] * a.k.row_stride + int64_t(kh) * a.k.head_stride;
#pragma unroll
        for (int h = 0; h < kHeads; ++h) acc[u][h] = 0.0f;
      }
      for (int d = lane; d < dk; d += 32) {
        float kv[kKeysPerWarp];
#pragma unroll
        for (int u = 0; u < kKeysPerWarp; ++u) kv[u] = kv_load<T>(a.k.data, base[u] + d);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          const float qv = sm.q[h * dk + d];
#pragma unroll
          for (int u = 0; u < kKeysPerWarp; ++u) acc[u][h] += qv * kv[u];
        }
      }
#pragma unroll
      for (int u = 0; u < kKeysPerWarp; ++u) {
        const float dot = reduce_scatter8(acc[u], lane);
        const int j = jb + u;
        if (lane % 4 == 0 && j < n) sm.p[((lane >> 2) & 7) * kTile + j] = dot * sm.k_scale[j] * a.scale;
      }
    }
    __syncthreads();
    for (int h = warp; h < kHeads; h += kWarps) {
      float* p = sm.p + h * kTile;
      const float s0 = lane < n ? p[lane] : -FLT_MAX, s1 = lane + 32 < n ? p[lane + 32] : -FLT_MAX;
      float tile_max = fmaxf(s0, s1);
      for (int off = 16; off > 0; off /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_old = sm.m[h], m_new = fmaxf(m_old, tile_max);
      const float e0 = lane < n ? expf(s0 - m_new) : 0.0f, e1 = lane + 32 < n ? expf(s1 - m_new) : 0.0f;
      if (lane < n) p[lane] = e0;
      if (lane + 32 < n) p[lane + 32] = e1;
      float sum = e0 + e1;
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      if (lane == 0) {
        const float alpha = expf(m_old - m_new);
        sm.alpha[h] = alpha;
        sm.l[h] = sm.l[h] * alpha + sum;
        sm.m[h] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int col = tid + c * kThreads;
      if (col >= dv) break;
#pragma unroll
      for (int h = 0; h < kHeads; ++h) o[c][h] *= sm.alpha[h];
      const int64_t col_base = int64_t(kh) * a.v.head_stride + col;
#pragma unroll 8
      for (int j = 0; j < n; ++j) {
        const float vv = kv_load<T>(a.v.data, sm.rows[j] * a.v.row_stride + col_base) * sm.v_scale[j];
#pragma unroll
        for (int h = 0; h < kHeads; ++h) o[c][h] += sm.p[h * kTile + j] * vv;
      }
    }
    __syncthreads();
  }

  const int64_t row0 = int64_t(t) * a.q_heads + h0;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int col = tid + c * kThreads;
    if (col >= dv) break;
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      if (h >= hg) break;
      if (num_splits == 1) {
        a.out[(row0 + h) * dv + col] = o[c][h] / sm.l[h];
      } else {
        ws_o[((int64_t(split) * a.tokens) * a.q_heads + row0 + h) * dv + col] = o[c][h];
      }
    }
  }
  if (num_splits > 1 && tid < hg) {
    float* ml = ws_ml + 2 * ((int64_t(split) * a.tokens) * a.q_heads + row0 + tid);
    ml[0] = lo < hi ? sm.m[tid] : -FLT_MAX;
    ml[1] = sm.l[tid];
  }
}

// out[t, h] = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s over the splits.
__global__ void combine_kernel(AttentionArgs a, int num_splits, const float* ws_o, const float* ws_ml) {
  const int t = blockIdx.x, h = blockIdx.y, dv = a.v.dim;
  if (a.seqs.token_seq && (t >= a.seqs.num_rows || a.seqs.token_seq[t] < 0)) return;
  const int64_t row = int64_t(t) * a.q_heads + h, stride = int64_t(a.tokens) * a.q_heads;
  float m = -FLT_MAX;
  for (int s = 0; s < num_splits; ++s) m = fmaxf(m, ws_ml[2 * (s * stride + row)]);
  float l = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float* ml = ws_ml + 2 * (s * stride + row);
    l += ml[1] * expf(ml[0] - m);
  }
  for (int col = threadIdx.x; col < dv; col += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      const float* ml = ws_ml + 2 * (s * stride + row);
      if (ml[1] > 0.0f) acc += ws_o[(s * stride + row) * dv + col] * expf(ml[0] - m);
    }
    a.out[row * dv + col] = acc / l;
  }
}

template <KvType T, int NC>
void launch_typed(const AttentionArgs& a, int num_splits, float* ws, cudaStream_t stream) {
  const int group = a.q_heads / a.k.heads, chunks = (group + kHeads - 1) / kHeads;
  const int split_len = num_splits > 1 ? ((a.max_context + num_splits - 1) / num_splits + kTile - 1) / kTile * kTile
                                       : a.max_context;
  const size_t smem = smem_bytes(a.k.dim);
  auto kernel = generic_attention_kernel<T, NC>;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  float* ws_o = ws;
  float* ws_ml = ws ? ws + int64_t(num_splits) * a.tokens * a.q_heads * a.v.dim : nullptr;
  dim3 grid(unsigned(a.tokens), unsigned(a.k.heads * chunks), unsigned(num_splits));
  kernel<<<grid, kThreads, smem, stream>>>(a, num_splits, split_len, ws_o, ws_ml);
  if (num_splits > 1) launch_attention_combine(a, num_splits, ws, stream);
}

template <KvType T>
void launch_for_type(const AttentionArgs& a, int num_splits, float* ws, cudaStream_t stream) {
  if (a.v.dim <= kThreads) return launch_typed<T, 1>(a, num_splits, ws, stream);
  if (a.v.dim <= 2 * kThreads) return launch_typed<T, 2>(a, num_splits, ws, stream);
  return launch_typed<T, 4>(a, num_splits, ws, stream);
}

}  // namespace

int64_t generic_workspace_floats(const AttentionArgs& a, int num_splits) {
  if (num_splits <= 1) return 0;
  return int64_t(num_splits) * a.tokens * a.q_heads * (a.v.dim + 2);
}

void launch_attention_combine(const AttentionArgs& a, int num_splits, const float* workspace, cudaStream_t stream) {
  const float* ws_o = workspace;
  const float* ws_ml = workspace + int64_t(num_splits) * a.tokens * a.q_heads * a.v.dim;
  combine_kernel<<<dim3(unsigned(a.tokens), unsigned(a.q_heads)), 128, 0, stream>>>(a, num_splits, ws_o, ws_ml);
}

void launch_generic_attention(const AttentionArgs& a, int num_splits, float* workspace, cudaStream_t stream) {
  if (a.tokens == 0) return;
  switch (a.k.type) {
    case KvType::F32: return launch_for_type<KvType::F32>(a, num_splits, workspace, stream);
    case KvType::BF16: return launch_for_type<KvType::BF16>(a, num_splits, workspace, stream);
    case KvType::FP8: return launch_for_type<KvType::FP8>(a, num_splits, workspace, stream);
  }
}

}  // namespace mx::cuda
