#include "quant/fp8_block.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mx {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

Fp8BlockMatrix fp8_block_quantize(const float* w, int64_t rows, int64_t cols, int64_t block) {
  int64_t br = ceil_div(rows, block), bc = ceil_div(cols, block);
  Fp8BlockMatrix m{Tensor::empty(DType::F8E4M3, {rows, cols}), Tensor::empty(DType::F32, {br, bc})};
  uint8_t* q = m.weight.data<uint8_t>();
  float* s = m.scale_inv.data<float>();
  for (int64_t i = 0; i < br; ++i) {
    for (int64_t j = 0; j < bc; ++j) {
      int64_t r1 = std::min(rows, (i + 1) * block), c1 = std::min(cols, (j + 1) * block);
      float amax = 0.f;
      for (int64_t r = i * block; r < r1; ++r)
        for (int64_t c = j * block; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      float scale = amax > 0.f ? amax / 448.f : 1.f;
      s[i * bc + j] = scale;
      for (int64_t r = i * block; r < r1; ++r)
        for (int64_t c = j * block; c < c1; ++c) q[r * cols + c] = f32_to_fp8e4m3(w[r * cols + c] / scale);
    }
  }
  return m;
}

Tensor fp8_block_dequantize(const Tensor& weight, const Tensor& scale_inv, int64_t block) {
  if (weight.ndim() != 2 || weight.dtype() != DType::F8E4M3)
    fail("FP8 block dequantize: weight must be f8e4m3 2-D, got {}", weight.describe());
  int64_t rows = weight.dim(0), cols = weight.dim(1);
  Shape want{ceil_div(rows, block), ceil_div(cols, block)};
  if (scale_inv.shape() != want)
    fail("FP8 block dequantize: weight_scale_inv {} does not match weight {} with {}-blocks (want {})",
         scale_inv.describe(), weight.describe(), block, shape_str(want));
  Tensor scale = scale_inv.dtype() == DType::F32 ? scale_inv : scale_inv.to(DType::F32);
  Tensor out = Tensor::empty(DType::F32, {rows, cols});
  const uint8_t* q = weight.data<uint8_t>();
  const float* s = scale.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = fp8e4m3_to_f32(q[r * cols + c]) * s[(r / block) * want[1] + c / block];
  return out;
}

}  // namespace mx
