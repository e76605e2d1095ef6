// Decode attention for GQA/MHA caches (BF16 or FP8 E4M3 K and V, head dim 64
// or 128): the memory-bound path of decode steps, where every cached K and V
// byte is read once per step and the arithmetic is small.
//   * A block = one query row x one KV head x up to kH of its q heads (the
//     group shares every K/V row it loads), 4 warps, one key range (split).
//   * Each lane owns 8 dims of a row: a row is read by kDim / 8 lanes with
//     one 16-byte (BF16) or 8-byte (FP8) load each, so a warp reads 2 (dim
//     128) or 4 (dim 64) rows per load instruction, and kUnroll row groups
//     are loaded before any is used (several KB in flight per warp).
//   * Scores: q (pre-multiplied by scale * log2 e) times the lane's 8 dims,
//     summed over the row's lanes with xor shuffles, so every lane of the row
//     holds all kH scores; online softmax in the log2 domain, per row group of
//     lanes (each has its own running max / sum / 8-dim output per head).
//   * At the end the row groups of a warp merge by shuffles, the warps through
//     shared memory; with key splits the partial (o, m, l) go to the workspace
//     of generic_attention.cu and its combine kernel merges them.
// The CUDA-core kernel of generic_attention.cu (a thread per output dim, a warp
// per 4 keys with lanes over dims) stays for F32 caches and other dims.
#include <cfloat>
#include <cmath>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"

namespace mx::cuda {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kDimsPerLane = 8;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// The 8 values of one lane's slice of a row, widened to F32 exactly.
template <KvType T>
struct RowSlice;

template <>
struct RowSlice<KvType::BF16> {
  uint4 raw;
  __device__ __forceinline__ void load(const void* base, int64_t element) {
    raw = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + element));
  }
  __device__ __forceinline__ void widen(float (&f)[kDimsPerLane]) const {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};

template <>
struct RowSlice<KvType::FP8> {
  uint2 raw;
  __device__ __forceinline__ void load(const void* base, int64_t element) {
    raw = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(base) + element));
  }
  __device__ __forceinline__ void widen(float (&f)[kDimsPerLane]) const {
    const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {  // E4M3 pairs -> half2 (exact) -> float2
        const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i] >> (16 * p)), __NV_E4M3);
        const float2 v = __half22float2(__half2(h));
        f[4 * i + 2 * p] = v.x;
        f[4 * i + 2 * p + 1] = v.y;
      }
    }
  }
};

// exp2 of x - m with m = -inf (no key seen yet) treated as 0, so that an
// all-masked state stays (m = -inf, l = 0, o = 0) instead of NaN.
__device__ __forceinline__ float safe_max(float m) { return m == -INFINITY ? 0.0f : m; }

template <KvType T, int kDim, int kH>
__global__ void __launch_bounds__(kThreads) gqa_decode_kernel(AttentionArgs a, int split_len, float* ws_o,
                                                              float* ws_ml, int num_splits) {
  constexpr int kLanesPerRow = kDim / kDimsPerLane;   // 16 or 8
  constexpr int kRowsPerLoad = 32 / kLanesPerRow;     // rows a warp reads per load: 2 or 4
  constexpr int kUnroll = kH >= 8 ? 2 : 4;            // row groups loaded before use
  constexpr int kWarpKeys = kRowsPerLoad * kUnroll;   // keys per warp iteration
  __shared__ float sm_m[kWarps][kH], sm_l[kWarps][kH];
  __shared__ float sm_o[kWarps][kH][kDim];

  const int t = blockIdx.x, split = blockIdx.z;
  const int seq = !a.seqs.token_seq ? 0 : t < a.seqs.num_rows ? a.seqs.token_seq[t] : -1;
  if (seq < 0) return;  // a row no sequence owns (the output was zeroed)
  const SeqInfo info = seq_info(a.seqs, seq);
  const int visible = info.num_cached + (t - info.q_begin) + 1;
  const int group = a.q_heads / a.k.heads, chunks = (group + kH - 1) / kH;
  const int kh = blockIdx.y / chunks, h0 = kh * group + (blockIdx.y % chunks) * kH;
  const int hg = min(kH, kh * group + group - h0);
  const int lo = split * split_len, hi = min(visible, lo + split_len);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / kLanesPerRow, dim0 = (lane % kLanesPerRow) * kDimsPerLane;

  float q[kH][kDimsPerLane];
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    const float* src = a.q + (int64_t(t) * a.q_heads + h0 + min(h, hg - 1)) * kDim + dim0;
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) q[h][d] = h < hg ? src[d] * a.scale * kLog2e : 0.0f;
  }
  float m[kH], l[kH], o[kH][kDimsPerLane];
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) o[h][d] = 0.0f;
  }
  const int64_t k_head = int64_t(kh) * a.k.head_stride + dim0, v_head = int64_t(kh) * a.v.head_stride + dim0;

  for (int start = lo + warp * kWarpKeys; start < hi; start += kWarps * kWarpKeys) {
    RowSlice<T> ks[kUnroll], vs[kUnroll];
    float k_scale[kUnroll], v_scale[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = start + u * kRowsPerLoad + sub;
      valid[u] = j < hi;
      const int64_t row = kv_row(a.seqs, seq, valid[u] ? j : hi - 1);
      ks[u].load(a.k.data, row * a.k.row_stride + k_head);
      vs[u].load(a.v.data, row * a.v.row_stride + v_head);
      k_scale[u] = T == KvType::FP8 ? __ldg(a.k.scale + row) : 1.0f;
      v_scale[u] = T == KvType::FP8 ? __ldg(a.v.scale + row) : 1.0f;
    }
    float s[kUnroll][kH];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kDimsPerLane];
      ks[u].widen(kf);
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        float acc = 0.0f;
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d) acc = fmaf(q[h][d], kf[d], acc);
        s[u][h] = acc;
      }
    }
#pragma unroll
    for (int off = 1; off < kLanesPerRow; off *= 2)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int h = 0; h < kH; ++h) s[u][h] += __shfl_xor_sync(0xffffffffu, s[u][h], off);
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      float m_new = m[h];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        s[u][h] = valid[u] ? s[u][h] * k_scale[u] : -INFINITY;
        m_new = fmaxf(m_new, s[u][h]);
      }
      const float base = safe_max(m_new), alpha = exp2f(m[h] - base);
      l[h] *= alpha;
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) o[h][d] *= alpha;
      m[h] = m_new;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) s[u][h] = exp2f(s[u][h] - base);  // now p
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kDimsPerLane];
      vs[u].widen(vf);
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        l[h] += s[u][h];
        const float p = s[u][h] * v_scale[u];
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d) o[h][d] = fmaf(p, vf[d], o[h][d]);
      }
    }
  }

  // Merge the warp's row groups: lanes kLanesPerRow apart hold the same dims.
#pragma unroll
  for (int off = kLanesPerRow; off < 32; off *= 2)
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[h], off), l_o = __shfl_xor_sync(0xffffffffu, l[h], off);
      const float m_n = fmaxf(m[h], m_o), base = safe_max(m_n);
      const float a1 = exp2f(m[h] - base), a2 = exp2f(m_o - base);
      l[h] = l[h] * a1 + l_o * a2;
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d)
        o[h][d] = o[h][d] * a1 + __shfl_xor_sync(0xffffffffu, o[h][d], off) * a2;
      m[h] = m_n;
    }
  if (sub == 0) {
#pragma unroll
    for (int h = 0; h < kH; ++h) {
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) sm_o[warp][h][dim0 + d] = o[h][d];
      if (lane == 0) sm_m[warp][h] = m[h], sm_l[warp][h] = l[h];
    }
  }
  __syncthreads();

  // Merge the warps; one thread per (head, dim).
  const int64_t row0 = int64_t(t) * a.q_heads + h0;
  for (int i = threadIdx.x; i < hg * kDim; i += kThreads) {
    const int h = i / kDim, d = i % kDim;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w][h]);
    const float base = safe_max(mx);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(sm_m[w][h] - base);
      sum += sm_l[w][h] * f;
      acc += sm_o[w][h][d] * f;
    }
    if (num_splits == 1) {
      a.out[(row0 + h) * kDim + d] = acc / sum;
      continue;
    }
    // The combine kernel works in the natural-log domain.
    const int64_t slot = int64_t(split) * a.tokens * a.q_heads + row0 + h;
    ws_o[slot * kDim + d] = acc;
    if (d == 0) ws_ml[2 * slot] = mx == -INFINITY ? -FLT_MAX : mx * kLn2, ws_ml[2 * slot + 1] = sum;
  }
}

template <KvType T, int kDim, int kH>
void launch(const AttentionArgs& a, int num_splits, int split_len, float* ws, cudaStream_t stream) {
  const int group = a.q_heads / a.k.heads, chunks = (group + kH - 1) / kH;
  float* ws_o = ws;
  float* ws_ml = ws ? ws + int64_t(num_splits) * a.tokens * a.q_heads * a.v.dim : nullptr;
  const dim3 grid(unsigned(a.tokens), unsigned(a.k.heads * chunks), unsigned(num_splits));
  gqa_decode_kernel<T, kDim, kH><<<grid, kThreads, 0, stream>>>(a, split_len, ws_o, ws_ml, num_splits);
}

template <KvType T, int kDim>
void launch_heads(const AttentionArgs& a, int num_splits, int split_len, float* ws, cudaStream_t stream) {
  const int group = a.q_heads / a.k.heads;
  if (group <= 1) return launch<T, kDim, 1>(a, num_splits, split_len, ws, stream);
  if (group <= 2) return launch<T, kDim, 2>(a, num_splits, split_len, ws, stream);
  if (group <= 4) return launch<T, kDim, 4>(a, num_splits, split_len, ws, stream);
  return launch<T, kDim, 8>(a, num_splits, split_len, ws, stream);
}

template <KvType T>
void launch_dims(const AttentionArgs& a, int num_splits, int split_len, float* ws, cudaStream_t stream) {
  if (a.k.dim == 64) return launch_heads<T, 64>(a, num_splits, split_len, ws, stream);
  return launch_heads<T, 128>(a, num_splits, split_len, ws, stream);
}

bool aligned(const KvView& v, int bytes_per_element, int load_bytes) {
  const int per_load = load_bytes / bytes_per_element;
  return reinterpret_cast<uintptr_t>(v.data) % load_bytes == 0 && v.row_stride % per_load == 0 &&
         v.head_stride % per_load == 0;
}

}  // namespace

bool gqa_decode_supports(const AttentionArgs& a) {
  const KvType type = a.k.type;
  if (type != a.v.type || (type != KvType::BF16 && type != KvType::FP8)) return false;
  if (a.k.dim != a.v.dim || (a.k.dim != 64 && a.k.dim != 128)) return false;
  if (a.k.heads <= 0 || a.q_heads % a.k.heads || a.v.heads != a.k.heads) return false;
  if (type == KvType::FP8 && (!a.k.scale || !a.v.scale)) return false;
  const int bytes = type == KvType::BF16 ? 2 : 1, load = 8 * bytes;
  return aligned(a.k, bytes, load) && aligned(a.v, bytes, load);
}

void launch_gqa_decode(const AttentionArgs& a, int num_splits, float* workspace, cudaStream_t stream) {
  if (a.tokens == 0) return;
  const int split_len = num_splits > 1 ? (a.max_context + num_splits - 1) / num_splits : a.max_context;
  if (a.k.type == KvType::BF16) launch_dims<KvType::BF16>(a, num_splits, split_len, workspace, stream);
  else launch_dims<KvType::FP8>(a, num_splits, split_len, workspace, stream);
  if (num_splits > 1) launch_attention_combine(a, num_splits, workspace, stream);
}

}  // namespace mx::cuda
