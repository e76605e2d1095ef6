// Elementwise ops, norms, rope and embedding of the CPU backend.
#include "ops/cpu_ops.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace mx {

std::unique_ptr<Ops> make_cpu_ops(ActivationMode mode) { return std::make_unique<CpuOps>(mode); }

int64_t require_rows(const Tensor& x, const char* op) {
  MX_CHECK(x.defined() && x.dtype() == DType::F32 && x.ndim() >= 1, "{}: expected an F32 activation, got {}", op,
           x.defined() ? x.describe() : "undefined");
  return x.dim(0);
}

namespace {

int64_t row_width(const Tensor& x) { return x.dim(0) ? x.numel() / x.dim(0) : 0; }

void norm_row(const float* x, const Tensor& weight, float eps, int64_t d, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += double(x[i]) * x[i];
  float inv = float(1.0 / std::sqrt(ss / double(d) + eps));
  if (weight.dtype() == DType::F32) {
    const float* w = weight.data<float>();
    for (int64_t i = 0; i < d; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    for (int64_t i = 0; i < d; ++i) out[i] = weight.get_f32(i) * (x[i] * inv);
  }
}

}  // namespace

Tensor CpuOps::embedding(const Tensor& table, const std::vector<int32_t>& ids) {
  const int64_t vocab = table.dim(0), d = table.dim(1);
  Tensor out = Tensor::empty(DType::F32, {int64_t(ids.size()), d});
  float* o = out.data<float>();
  for (size_t t = 0; t < ids.size(); ++t) {
    int64_t id = ids[t];
    if (id < 0 || id >= vocab) fail_input("token id {} is outside the vocabulary [0, {})", id, vocab);
    for (int64_t i = 0; i < d; ++i) o[int64_t(t) * d + i] = table.get_f32(id * d + i);
  }
  return out;
}

Tensor CpuOps::rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  const int64_t rows = require_rows(x, "rms_norm"), d = row_width(x);
  MX_CHECK(weight.numel() == d, "rms_norm weight {} for rows of {}", weight.describe(), d);
  Tensor out = Tensor::empty(DType::F32, x.shape());
  for (int64_t r = 0; r < rows; ++r) norm_row(x.data<float>() + r * d, weight, eps, d, out.data<float>() + r * d);
  return out;
}

Tensor CpuOps::add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) {
  add_inplace(residual, delta);
  return rms_norm(residual, weight, eps);
}

void CpuOps::add_inplace(Tensor& x, const Tensor& delta) { axpy_inplace(x, delta, 1.0f); }

void CpuOps::axpy_inplace(Tensor& x, const Tensor& delta, float scale) {
  require_rows(x, "add");
  require_rows(delta, "add");
  MX_CHECK(x.numel() == delta.numel(), "add: {} and {}", x.describe(), delta.describe());
  float* a = x.data<float>();
  const float* b = delta.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) a[i] += scale * b[i];
}

void CpuOps::rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                          int64_t head_stride, int64_t offset) {
  const int64_t rows = require_rows(x, "rope"), d = row_width(x), half = rope.rotary_dim / 2;
  MX_CHECK(int64_t(positions.size()) == rows, "rope: {} positions for {} rows", positions.size(), rows);
  MX_CHECK(heads * head_stride <= d && offset + rope.rotary_dim <= head_stride, "rope: {} heads of stride {} in {}",
           heads, head_stride, x.describe());
  std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      float angle = float(positions[size_t(t)]) * rope.inv_freq[size_t(i)];
      cos[size_t(i)] = std::cos(angle) * rope.attention_factor;
      sin[size_t(i)] = std::sin(angle) * rope.attention_factor;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* p = x.data<float>() + t * d + h * head_stride + offset;
      for (int64_t i = 0; i < half; ++i) {
        // Interleaved pairs (x[2i], x[2i+1]); neox pairs (x[i], x[i + half]).
        float& a = rope.style == RopeTable::Style::Interleaved ? p[2 * i] : p[i];
        float& b = rope.style == RopeTable::Style::Interleaved ? p[2 * i + 1] : p[i + half];
        float x0 = a, x1 = b, c = cos[size_t(i)], s = sin[size_t(i)];
        a = x0 * c - x1 * s;
        b = x1 * c + x0 * s;
      }
    }
  }
}

Tensor CpuOps::silu_and_mul(const Tensor& gate, const Tensor& up) {
  require_rows(gate, "silu_and_mul");
  MX_CHECK(gate.shape() == up.shape(), "silu_and_mul: {} and {}", gate.describe(), up.describe());
  Tensor out = Tensor::empty(DType::F32, gate.shape());
  const float *g = gate.data<float>(), *u = up.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < gate.numel(); ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  return out;
}

Tensor CpuOps::slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) {
  const int64_t rows = require_rows(x, "slice_cols"), d = row_width(x);
  MX_CHECK(groups > 0 && d % groups == 0 && 0 <= begin && begin <= end && end <= d / groups,
           "slice_cols [{}, {}) of {} groups in {}", begin, end, groups, x.describe());
  const int64_t gw = d / groups, w = end - begin;
  Tensor out = Tensor::empty(DType::F32, {rows, groups * w});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g)
      std::memcpy(out.data<float>() + (r * groups + g) * w, x.data<float>() + r * d + g * gw + begin,
                  size_t(w) * 4);
  return out;
}

Tensor CpuOps::gather_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  const int64_t n = require_rows(x, "gather_rows"), d = row_width(x);
  Shape s = x.shape();
  s[0] = int64_t(rows.size());
  Tensor out = Tensor::empty(DType::F32, s);
  for (size_t i = 0; i < rows.size(); ++i) {
    MX_CHECK(rows[i] >= 0 && rows[i] < n, "gather_rows: row {} of {}", rows[i], n);
    std::memcpy(out.data<float>() + int64_t(i) * d, x.data<float>() + rows[i] * d, size_t(d) * 4);
  }
  return out;
}

void CpuOps::scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) {
  const int64_t n = require_rows(dst, "scatter_rows"), d = row_width(dst);
  MX_CHECK(src.numel() == int64_t(rows.size()) * d, "scatter_rows: {} rows of {} into {}", rows.size(),
           src.describe(), dst.describe());
  for (size_t i = 0; i < rows.size(); ++i) {
    MX_CHECK(rows[i] >= 0 && rows[i] < n, "scatter_rows: row {} of {}", rows[i], n);
    std::memcpy(dst.data<float>() + rows[i] * d, src.data<float>() + int64_t(i) * d, size_t(d) * 4);
  }
}

Tensor CpuOps::concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) {
  const int64_t rows = require_rows(a, "concat_cols");
  require_rows(b, "concat_cols");
  MX_CHECK(b.dim(0) == rows && row_width(a) % groups == 0, "concat_cols: {} and {} in {} groups", a.describe(),
           b.describe(), groups);
  const int64_t da = row_width(a) / groups, bw = row_width(b);
  MX_CHECK(shared_b || bw % groups == 0, "concat_cols: {} is not {} groups", b.describe(), groups);
  const int64_t db = shared_b ? bw : bw / groups;
  Tensor out = Tensor::empty(DType::F32, {rows, groups, da + db});
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      float* o = out.data<float>() + (t * groups + g) * (da + db);
      std::memcpy(o, a.data<float>() + t * row_width(a) + g * da, size_t(da) * 4);
      std::memcpy(o + da, b.data<float>() + t * bw + (shared_b ? 0 : g * db), size_t(db) * 4);
    }
  return out;
}

}  // namespace mx
