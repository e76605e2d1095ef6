#include "quant/int4_group.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mx {

Int4GroupMatrix int4_group_quantize(const float* w, int64_t rows, int64_t cols, int64_t group) {
  if (group % 8 != 0 || cols % group != 0)
    fail("INT4 quantization needs group % 8 == 0 and columns % group == 0, got group {} columns {}", group, cols);
  Int4GroupMatrix m{Tensor::empty(DType::I32, {rows, cols / 8}), Tensor::empty(DType::BF16, {rows, cols / group})};
  uint32_t* packed = reinterpret_cast<uint32_t*>(m.packed.raw());
  uint16_t* scale = m.scale.data<uint16_t>();
  for (int64_t g = 0; g < rows * cols / group; ++g) {
    const float* x = w + g * group;
    float amax = 0.f;
    for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(x[i]));
    uint16_t s_bits = f32_to_bf16(amax > 0.f ? amax / 7.f : 1.f);
    scale[g] = s_bits;
    float s = bf16_to_f32(s_bits);
    for (int64_t i = 0; i < group; ++i) {
      int q = int(std::clamp(std::nearbyint(x[i] / s), -8.f, 7.f));
      int64_t flat = g * group + i;
      packed[flat / 8] |= uint32_t(q + 8) << (4 * (flat % 8));
    }
  }
  return m;
}

Tensor int4_group_dequantize(const Tensor& packed, const Tensor& scale, int64_t group) {
  if (packed.ndim() != 2 || packed.dtype() != DType::I32)
    fail("INT4 dequantize: weight_packed must be i32 2-D, got {}", packed.describe());
  int64_t rows = packed.dim(0), cols = packed.dim(1) * 8;
  if (group <= 0 || cols % group != 0 || scale.ndim() != 2 || scale.dim(0) != rows || scale.dim(1) != cols / group)
    fail("INT4 dequantize: weight_scale {} does not match weight_packed {} with group {} (want [{}, {}])",
         scale.describe(), packed.describe(), group, rows, group > 0 ? cols / group : 0);
  Tensor s = scale.dtype() == DType::F32 ? scale : scale.to(DType::F32);
  Tensor out = Tensor::empty(DType::F32, {rows, cols});
  const int32_t* p = packed.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.data<float>()[r * cols + c] = float(int4_unpack(p, r * cols + c)) * s.data<float>()[r * (cols / group) + c / group];
  return out;
}

}  // namespace mx
