// FP8 block and INT4 group codecs, and dequantize_to_f32 over every format.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/linear_weight.h"
#include "quant/mxfp4.h"

namespace mx {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, stddev);
  std::vector<float> w(size_t(rows * cols));
  for (auto& v : w) v = normal(rng);
  return w;
}

TEST(Fp8Block, DequantizeMultipliesBlockScale) {
  // 130 x 200: partial edge blocks in both directions, scale grid 2 x 2.
  Tensor w = Tensor::empty(DType::F8E4M3, {130, 200});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<uint8_t>()[i] = 0x38;  // 1.0
  Tensor s = Tensor::from_f32({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Tensor d = fp8_block_dequantize(w, s);
  EXPECT_EQ(d.get_f32(0), 1.f);
  EXPECT_EQ(d.get_f32(127), 1.f);
  EXPECT_EQ(d.get_f32(128), 2.f);                // row 0, col 128
  EXPECT_EQ(d.get_f32(128 * 200 + 5), 3.f);      // row 128, col 5
  EXPECT_EQ(d.get_f32(129 * 200 + 199), 4.f);
  EXPECT_THROW(fp8_block_dequantize(w, Tensor::from_f32({1.f}, {1, 1})), Error);
}

TEST(Fp8Block, QuantizeRoundTripWithinFp8Precision) {
  const int64_t rows = 256, cols = 384;
  std::vector<float> w = random_matrix(rows, cols, 0.02f, 1);
  w[5] = 3.f;  // one large block
  Fp8BlockMatrix m = fp8_block_quantize(w.data(), rows, cols);
  EXPECT_EQ(m.scale_inv.describe(), "f32[2, 3]");
  EXPECT_FLOAT_EQ(m.scale_inv.get_f32(0), 3.f / 448.f);
  std::vector<float> d = fp8_block_dequantize(m.weight, m.scale_inv).to_f32_vector();
  for (size_t i = 0; i < w.size(); ++i) {
    float block_amax_bound = std::fabs(w[i]) * 0.0625f + 1e-6f;  // e4m3: 3 mantissa bits
    EXPECT_NEAR(d[i], w[i], block_amax_bound + m.scale_inv.get_f32(0) * 0.002f) << i;
  }
  EXPECT_EQ(d[5], 3.f);  // the block max maps to 448 exactly
}

TEST(Int4Group, NibblesLowFirstOffsetEight) {
  Tensor packed = Tensor::empty(DType::I32, {1, 4});
  packed.data<int32_t>()[0] = int32_t(0x76543210u);  // nibble j = j -> q = j - 8
  packed.data<int32_t>()[1] = int32_t(0xFEDCBA98u);  // q = 0..7
  Tensor scale = Tensor::from_f32({0.5f}, {1, 1}).to(DType::BF16);
  std::vector<float> d = int4_group_dequantize(packed, scale, 32).to_f32_vector();
  for (int j = 0; j < 8; ++j) EXPECT_EQ(d[size_t(j)], float(j - 8) * 0.5f) << j;
  for (int j = 0; j < 8; ++j) EXPECT_EQ(d[size_t(8 + j)], float(j) * 0.5f) << j;
  EXPECT_EQ(int4_unpack(packed.data<int32_t>(), 15), 7);
}

TEST(Int4Group, QuantizeRoundTripWithinHalfStep) {
  const int64_t rows = 4, cols = 64;
  std::vector<float> w = random_matrix(rows, cols, 1.f, 2);
  Int4GroupMatrix m = int4_group_quantize(w.data(), rows, cols, 32);
  EXPECT_EQ(m.packed.describe(), "i32[4, 8]");
  EXPECT_EQ(m.scale.describe(), "bf16[4, 2]");
  std::vector<float> d = int4_group_dequantize(m.packed, m.scale, 32).to_f32_vector();
  for (size_t i = 0; i < w.size(); ++i) {
    float s = m.scale.get_f32(int64_t(i / 32));
    EXPECT_LE(std::fabs(d[i] - w[i]), 0.5f * s + 1e-6f) << i;
  }
  EXPECT_THROW(int4_group_dequantize(m.packed, m.scale, 16), Error);
}

TEST(DequantizeToF32, EveryFormat) {
  const int64_t out = 128, in = 256;
  std::vector<float> w = random_matrix(out, in, 0.05f, 3);
  for (auto& v : w) v = round_bf16(v);

  LinearWeight dense{"dense", WeightFormat::Dense, out, in, 0, Tensor::from_f32(w, {out, in}).to(DType::BF16), {}, {}, false};
  EXPECT_EQ(dequantize_to_f32(dense).to_f32_vector(), w);

  Mxfp4Matrix mx4 = mxfp4_quantize_matrix(w.data(), out, in);
  LinearWeight mx{"mx", WeightFormat::Mxfp4, out, in, 32, mx4.weight, mx4.scale, {}, true};
  EXPECT_EQ(dequantize_to_f32(mx).to_f32_vector(), mxfp4_dequantize_matrix(mx4.weight, mx4.scale).to_f32_vector());

  Fp8BlockMatrix f8 = fp8_block_quantize(w.data(), out, in);
  LinearWeight fp{"fp8", WeightFormat::Fp8Block, out, in, 128, f8.weight, f8.scale_inv, {}, false};
  EXPECT_NEAR(dequantize_to_f32(fp).get_f32(7), w[7], 0.01f);

  Int4GroupMatrix i4 = int4_group_quantize(w.data(), out, in, 32);
  LinearWeight q4{"int4", WeightFormat::Int4Group, out, in, 32, i4.packed, i4.scale, {}, false};
  EXPECT_EQ(dequantize_to_f32(q4).to_f32_vector(), int4_group_dequantize(i4.packed, i4.scale, 32).to_f32_vector());

  q4.in_features = 512;  // declared shape disagrees with the tensors
  EXPECT_THROW(dequantize_to_f32(q4), Error);
}

}  // namespace
}  // namespace mx
