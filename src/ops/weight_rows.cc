// Row-wise dequantization of every LinearWeight format, used by the CPU
// matmul to expand a few rows at a time (weights stay in their stored format
// in memory).
#include <array>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"

namespace mx {

namespace {

float scale_at(const Tensor& s, int64_t i) {
  switch (s.dtype()) {
    case DType::F32: return s.data<float>()[i];
    case DType::BF16: return bf16_to_f32(s.data<uint16_t>()[i]);
    case DType::F16: return f16_to_f32(s.data<uint16_t>()[i]);
    case DType::U8:
    case DType::E8M0: return e8m0_to_f32(s.data<uint8_t>()[i]);
    default: fail("unsupported scale dtype {}", dtype_name(s.dtype()));
  }
}

void dense_row(const LinearWeight& w, int64_t r, float* out) {
  const int64_t k = w.in_features;
  switch (w.weight.dtype()) {
    case DType::F32: std::memcpy(out, w.weight.data<float>() + r * k, size_t(k) * 4); return;
    case DType::BF16: {
      const uint16_t* p = w.weight.data<uint16_t>() + r * k;
      for (int64_t i = 0; i < k; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    case DType::F16: {
      const uint16_t* p = w.weight.data<uint16_t>() + r * k;
      for (int64_t i = 0; i < k; ++i) out[i] = f16_to_f32(p[i]);
      return;
    }
    default: fail("linear {}: dense weight of dtype {} is not supported", w.name, dtype_name(w.weight.dtype()));
  }
}

// All 256 E4M3 values, decoded once.
const float* fp8_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = fp8e4m3_to_f32(uint8_t(i));
    return t;
  }();
  return table.data();
}

void fp8_block_row(const LinearWeight& w, int64_t r, float* out) {
  const int64_t k = w.in_features, block = w.group_size > 0 ? w.group_size : 128;
  const float* lut = fp8_table();
  const uint8_t* p = w.weight.data<uint8_t>() + r * k;
  const int64_t scale_cols = w.scale.dim(1);
  for (int64_t c = 0; c < k; c += block) {
    float s = scale_at(w.scale, (r / block) * scale_cols + c / block);
    for (int64_t i = c; i < std::min(k, c + block); ++i) out[i] = lut[p[i]] * s;
  }
}

void mxfp4_row(const LinearWeight& w, int64_t r, float* out) {
  const int64_t k = w.in_features;
  const uint8_t* p = w.weight.data<uint8_t>() + r * (k / 2);
  const uint8_t* sc = w.scale.data<uint8_t>() + r * (k / 32);
  for (int64_t g = 0; g < k / 32; ++g) {
    float s = e8m0_to_f32(sc[g]);
    for (int64_t j = 0; j < 16; ++j) {
      uint8_t b = p[g * 16 + j];
      out[g * 32 + 2 * j] = e2m1_to_f32(b & 0xf) * s;
      out[g * 32 + 2 * j + 1] = e2m1_to_f32(b >> 4) * s;
    }
  }
}

void int4_row(const LinearWeight& w, int64_t r, float* out) {
  const int64_t k = w.in_features, group = w.group_size > 0 ? w.group_size : 32;
  const uint32_t* p = reinterpret_cast<const uint32_t*>(w.weight.raw()) + r * (k / 8);
  const int64_t scale_cols = w.scale.dim(1);
  for (int64_t i = 0; i < k; ++i) {
    int q = int((p[i / 8] >> (4 * (i % 8))) & 0xf) - 8;
    out[i] = float(q) * scale_at(w.scale, r * scale_cols + i / group);
  }
}

}  // namespace

void dequantize_rows(const LinearWeight& w, int64_t row_begin, int64_t row_end, float* out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float* o = out + (r - row_begin) * w.in_features;
    switch (w.format) {
      case WeightFormat::Dense: dense_row(w, r, o); break;
      case WeightFormat::Fp8Block: fp8_block_row(w, r, o); break;
      case WeightFormat::Mxfp4: mxfp4_row(w, r, o); break;
      case WeightFormat::Int4Group: int4_row(w, r, o); break;
    }
  }
}

Tensor dequantize_weight(const LinearWeight& w) {
  Tensor t = Tensor::empty(DType::F32, {w.out_features, w.in_features});
  dequantize_rows(w, 0, w.out_features, t.data<float>());
  return t;
}

}  // namespace mx
