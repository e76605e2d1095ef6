// Paged KV storage and attention of the CPU backend. The cache holds BF16,
// F32, or FP8 E4M3 with one F32 scale per token and tensor (amax / 448 over
// the token's heads), which keeps outliers of one token from crushing the
// others, as a per-tensor scale fixed in advance would.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/cpu_ops.h"

namespace mx {

namespace {

constexpr float kFp8Max = 448.0f;

void store_row(Tensor& dst, Tensor& scale, int64_t slot, const float* src, int64_t n) {
  switch (dst.dtype()) {
    case DType::F32: std::memcpy(dst.data<float>() + slot * n, src, size_t(n) * 4); return;
    case DType::BF16: {
      uint16_t* d = dst.data<uint16_t>() + slot * n;
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F8E4M3: {
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      float s = amax > 0 ? amax / kFp8Max : 1.0f;
      scale.data<float>()[slot] = s;
      uint8_t* d = dst.data<uint8_t>() + slot * n;
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp8e4m3(src[i] / s);
      return;
    }
    default: fail("KV cache of dtype {} is not supported", dtype_name(dst.dtype()));
  }
}

void load_row(const Tensor& src, const Tensor& scale, int64_t slot, int64_t n, float* out) {
  switch (src.dtype()) {
    case DType::F32: std::memcpy(out, src.data<float>() + slot * n, size_t(n) * 4); return;
    case DType::BF16: {
      const uint16_t* p = src.data<uint16_t>() + slot * n;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    case DType::F8E4M3: {
      const uint8_t* p = src.data<uint8_t>() + slot * n;
      float s = scale.data<float>()[slot];
      for (int64_t i = 0; i < n; ++i) out[i] = fp8e4m3_to_f32(p[i]) * s;
      return;
    }
    default: fail("KV cache of dtype {} is not supported", dtype_name(src.dtype()));
  }
}

int64_t slot_of(const std::vector<int32_t>& block_table, int64_t block_size, int64_t index) {
  size_t b = size_t(index / block_size);
  MX_CHECK(b < block_table.size(), "token {} needs block {} but the block table has {}", index, b,
           block_table.size());
  return int64_t(block_table[b]) * block_size + index % block_size;
}

// Rows [0, num_tokens) of one sequence from a cache tensor, F32 [n, heads, dim].
Tensor gather(const Tensor& src, const Tensor& scale, const std::vector<int32_t>& block_table, int64_t num_tokens) {
  const int64_t bs = src.dim(1), heads = src.dim(2), dim = src.dim(3), row = heads * dim;
  Tensor out = Tensor::empty(DType::F32, {num_tokens, heads, dim});
  for (int64_t i = 0; i < num_tokens; ++i) {
    int64_t slot = slot_of(block_table, bs, i);
    MX_CHECK(slot < src.dim(0) * bs, "slot {} beyond the {} cache blocks", slot, src.dim(0));
    load_row(src, scale, slot, row, out.data<float>() + i * row);
  }
  return out;
}

}  // namespace

KvLayerCache CpuOps::allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                                 bool latent, DType dtype) {
  MX_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F8E4M3, "KV cache dtype {}",
           dtype_name(dtype));
  KvLayerCache c;
  c.v_dim = v_dim;
  c.k = Tensor::zeros(dtype, {num_blocks, block_size, heads, k_dim});
  if (!latent) c.v = Tensor::zeros(dtype, {num_blocks, block_size, heads, v_dim});
  if (dtype == DType::F8E4M3) {
    c.k_scale = Tensor::zeros(DType::F32, {num_blocks, block_size});
    if (!latent) c.v_scale = Tensor::zeros(DType::F32, {num_blocks, block_size});
  }
  return c;
}

void CpuOps::store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) {
  const int64_t tokens = require_rows(k, "store_kv"), k_row = cache.heads() * cache.k_dim();
  MX_CHECK(int64_t(slots.size()) == tokens && k.numel() == tokens * k_row, "store_kv: {} slots, k {}, cache {}",
           slots.size(), k.describe(), cache.k.describe());
  const int64_t capacity = cache.k.dim(0) * cache.block_size();
  for (int64_t t = 0; t < tokens; ++t) {
    MX_CHECK(slots[size_t(t)] >= 0 && slots[size_t(t)] < capacity, "slot {} outside the cache of {} tokens",
             slots[size_t(t)], capacity);
    store_row(cache.k, cache.k_scale, slots[size_t(t)], k.data<float>() + t * k_row, k_row);
    if (cache.v.defined()) {
      const int64_t v_row = cache.heads() * cache.v_dim;
      MX_CHECK(v.numel() == tokens * v_row, "store_kv: v {} for cache {}", v.describe(), cache.v.describe());
      store_row(cache.v, cache.v_scale, slots[size_t(t)], v.data<float>() + t * v_row, v_row);
    }
  }
}

Tensor CpuOps::gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                               int64_t num_tokens) {
  return gather(cache.k, cache.k_scale, block_table, num_tokens);
}

Tensor CpuOps::paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta, float scale) {
  const int64_t tokens = require_rows(q, "paged_attention");
  MX_CHECK(q.ndim() == 3 && q.dim(2) == cache.k_dim(), "paged_attention: q {} for cache {}", q.describe(),
           cache.k.describe());
  const int64_t q_heads = q.dim(1), dv = cache.v_dim;
  Tensor out = Tensor::empty(DType::F32, {tokens, q_heads, dv});
  for (const AttentionSeq& s : meta.seqs) {
    if (s.num_new == 0) continue;
    const int64_t ctx = s.num_cached + s.num_new;
    Tensor k = gather(cache.k, cache.k_scale, s.block_table, ctx);
    Tensor v = cache.v.defined() ? gather(cache.v, cache.v_scale, s.block_table, ctx)
                                 : slice_cols(k.reshape({ctx, cache.heads() * cache.k_dim()}), cache.heads(), 0, dv)
                                       .reshape({ctx, cache.heads(), dv});
    Tensor o = attention(q.slice_rows(s.q_begin, s.q_begin + s.num_new), k, v, scale);
    std::memcpy(out.data<float>() + s.q_begin * q_heads * dv, o.raw(), o.nbytes());
  }
  return out;
}

Tensor CpuOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  const int64_t tq = q.dim(0), heads = q.dim(1), dk = q.dim(2), tk = k.dim(0), kv_heads = k.dim(1), dv = v.dim(2);
  MX_CHECK(k.dim(2) == dk && v.dim(0) == tk && v.dim(1) == kv_heads && heads % kv_heads == 0 && tk >= tq,
           "attention: q {}, k {}, v {}", q.describe(), k.describe(), v.describe());
  const int64_t group = heads / kv_heads, past = tk - tq;
  Tensor out = Tensor::empty(DType::F32, {tq, heads, dv});
  const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
  float* op = out.data<float>();
  ThreadPool::global().parallel_for(tq * heads, [&](int64_t b, int64_t e) {
    std::vector<float> p(static_cast<size_t>(tk));
    for (int64_t job = b; job < e; ++job) {
      const int64_t i = job / heads, h = job % heads, kh = h / group, visible = past + i + 1;
      const float* qv = qp + (i * heads + h) * dk;
      float mx = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        p[size_t(j)] = scale * dot_f32(qv, kp + (j * kv_heads + kh) * dk, dk);
        mx = std::max(mx, p[size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < visible; ++j) sum += p[size_t(j)] = std::exp(p[size_t(j)] - mx);
      float* o = op + (i * heads + h) * dv;
      std::fill(o, o + dv, 0.0f);
      for (int64_t j = 0; j < visible; ++j) {
        const float w = float(p[size_t(j)] / sum);
        const float* vv = vp + (j * kv_heads + kh) * dv;
        for (int64_t c = 0; c < dv; ++c) o[c] += w * vv[c];
      }
    }
  });
  return out;
}

}  // namespace mx
