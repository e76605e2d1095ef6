#include "core/error.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/linear_weight.h"
#include "quant/mxfp4.h"

namespace mx {

Tensor dequantize_to_f32(const LinearWeight& w) {
  if (!w.defined()) fail("dequantize_to_f32: linear '{}' has no weight", w.name);
  Tensor out;
  switch (w.format) {
    case WeightFormat::Dense: out = w.weight.to(DType::F32); break;
    case WeightFormat::Fp8Block: out = fp8_block_dequantize(w.weight, w.scale, w.group_size ? w.group_size : kFp8Block); break;
    case WeightFormat::Mxfp4: out = mxfp4_dequantize_matrix(w.weight, w.scale); break;
    case WeightFormat::Int4Group: out = int4_group_dequantize(w.weight, w.scale, w.group_size ? w.group_size : 32); break;
  }
  if (out.shape() != Shape{w.out_features, w.in_features})
    fail("dequantize_to_f32: linear '{}' dequantized to {} but declares [{}, {}]", w.name, out.describe(),
         w.out_features, w.in_features);
  return out;
}

}  // namespace mx
