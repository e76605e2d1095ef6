// Linear layers over every weight format. Weights stay as stored (4-bit MXFP4
// and INT4, FP8, BF16); each worker dequantizes a small tile of rows into a
// private F32 buffer and multiplies all tokens against it, so memory traffic
// stays at the stored size and the tile is reused across tokens.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/cpu_ops.h"
#include "quant/mxfp4.h"

namespace mx {

namespace {

constexpr int64_t kRowTile = 16;

void check_weight(const LinearWeight& w) {
  MX_CHECK(w.defined(), "linear {}: weight not loaded", w.name);
  const int64_t k = w.in_features;
  switch (w.format) {
    case WeightFormat::Mxfp4:
      MX_CHECK(k % 32 == 0 && w.weight.numel() == w.out_features * k / 2, "linear {}: MXFP4 weight {} for [{}, {}]",
               w.name, w.weight.describe(), w.out_features, k);
      break;
    case WeightFormat::Int4Group:
      MX_CHECK(k % 8 == 0 && w.weight.numel() == w.out_features * k / 8, "linear {}: INT4 weight {} for [{}, {}]",
               w.name, w.weight.describe(), w.out_features, k);
      break;
    default:
      MX_CHECK(w.weight.numel() == w.out_features * k, "linear {}: weight {} for [{}, {}]", w.name,
               w.weight.describe(), w.out_features, k);
  }
}

}  // namespace

Tensor CpuOps::linear(const Tensor& x_in, const LinearWeight& w) {
  const int64_t tokens = require_rows(x_in, "linear");
  check_weight(w);
  const int64_t k = w.in_features, n = w.out_features;
  if (x_in.numel() != tokens * k)
    fail("linear {}: input {} does not have {} features", w.name, x_in.describe(), k);
  Tensor x = x_in;
  if (mode_ == ActivationMode::W4A4 && w.format == WeightFormat::Mxfp4 && w.quantize_input) {
    x = x_in.clone();
    mxfp4_qdq_activation_inplace(x.data<float>(), x.numel());
  }
  Tensor y = Tensor::empty(DType::F32, {tokens, n});
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const bool direct = w.format == WeightFormat::Dense && w.weight.dtype() == DType::F32;
  // Few tokens and BF16 weights: widen inside the dot product instead of
  // through the tile buffer (each weight element is used only a few times).
  const bool bf16_inline = w.format == WeightFormat::Dense && w.weight.dtype() == DType::BF16 && tokens <= 4;
  const float* bias = w.bias.defined() ? w.bias.data<float>() : nullptr;
  const int64_t tiles = (n + kRowTile - 1) / kRowTile;
  ThreadPool::global().parallel_for(tiles, [&](int64_t tb, int64_t te) {
    if (bf16_inline) {
      const uint16_t* wp = w.weight.data<uint16_t>();
      for (int64_t r = tb * kRowTile; r < std::min(n, te * kRowTile); ++r)
        for (int64_t t = 0; t < tokens; ++t)
          yp[t * n + r] = dot_bf16(xp + t * k, wp + r * k, k) + (bias ? bias[r] : 0.0f);
      return;
    }
    std::vector<float> buf(direct ? 0 : size_t(kRowTile * k));
    for (int64_t tile = tb; tile < te; ++tile) {
      const int64_t r0 = tile * kRowTile, r1 = std::min(n, r0 + kRowTile);
      const float* rows = direct ? w.weight.data<float>() + r0 * k : buf.data();
      if (!direct) dequantize_rows(w, r0, r1, buf.data());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = r0; r < r1; ++r)
          yp[t * n + r] = dot_f32(xp + t * k, rows + (r - r0) * k, k) + (bias ? bias[r] : 0.0f);
    }
  });
  return y;
}

Tensor CpuOps::head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) {
  const int64_t tokens = require_rows(x, "head_matmul");
  MX_CHECK(w.ndim() == 3 && w.dtype() == DType::F32, "head_matmul: weight must be F32 [heads, rows, cols], got {}",
           w.describe());
  const int64_t heads = w.dim(0), a = transpose_w ? w.dim(1) : w.dim(2), b = transpose_w ? w.dim(2) : w.dim(1);
  MX_CHECK(x.numel() == tokens * heads * a, "head_matmul: input {} for weight {}", x.describe(), w.describe());
  Tensor y = Tensor::zeros(DType::F32, {tokens, heads, b});
  const float *xp = x.data<float>(), *wp = w.data<float>();
  float* yp = y.data<float>();
  ThreadPool::global().parallel_for(heads, [&](int64_t hb, int64_t he) {
    for (int64_t h = hb; h < he; ++h) {
      const float* wh = wp + h * a * b;
      for (int64_t t = 0; t < tokens; ++t) {
        const float* xv = xp + (t * heads + h) * a;
        float* yv = yp + (t * heads + h) * b;
        if (!transpose_w) {
          for (int64_t j = 0; j < b; ++j) yv[j] = dot_f32(xv, wh + j * a, a);
        } else {
          // y[j] = sum_i w[i][j] x[i]: accumulate rows of w scaled by x[i].
          for (int64_t i = 0; i < a; ++i)
            for (int64_t j = 0; j < b; ++j) yv[j] += xv[i] * wh[i * b + j];
        }
      }
    }
  });
  return y;
}

}  // namespace mx
