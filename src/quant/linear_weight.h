// The weight of one Linear layer in the format the checkpoint stores it. The
// model never branches on the format: ops.linear / ops.fused_moe dispatch on it
// and backends may re-lay it out once at load time.
#pragma once
#include <string>

#include "core/tensor.h"

namespace mx {

enum class WeightFormat {
  Dense,        // weight: BF16/F16/F32 [out, in]
  Fp8Block,     // weight: F8E4M3 [out, in]; scale: F32 [ceil(out/128), ceil(in/128)] (weight_scale_inv)
  Mxfp4,        // weight: U8 [out, in/2] (E2M1 pairs, low nibble first); scale: U8 E8M0 [out, in/32]
  Int4Group,    // weight: I32 [out, in/8] (8 nibbles, offset-8); scale: BF16 [out, in/group]
};

// How activations entering an MXFP4 Linear are treated (the checkpoint's
// input_tensors spec): W4A16 keeps them BF16; W4A4 quantize-dequantizes them
// per 32 along K exactly as mxfp4.md's reference algorithm.
enum class ActivationMode { W4A16, W4A4 };

struct LinearWeight {
  std::string name;  // checkpoint name without ".weight", for messages
  WeightFormat format = WeightFormat::Dense;
  int64_t out_features = 0, in_features = 0;
  int64_t group_size = 0;  // 128 (fp8 block), 32 (mxfp4/int4)
  Tensor weight;
  Tensor scale;
  Tensor bias;  // optional, F32 [out]
  // True for MXFP4 Linears whose activations the checkpoint quantizes (W4A4
  // applies only to these).
  bool quantize_input = false;

  bool defined() const { return weight.defined(); }
};

// The weight as F32 [out_features, in_features], exactly as the format
// defines it (MXFP4 and INT4 are exact; FP8 block is fp8 * scale_inv in F32).
// Reference use (tests, golden comparisons); implemented in quant/dequantize.cc.
Tensor dequantize_to_f32(const LinearWeight& w);

}  // namespace mx
