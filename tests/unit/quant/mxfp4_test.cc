#include "quant/mxfp4.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx {
namespace {

// An independent transcription of mxfp4.md's reference, in double precision
// with a nearest-candidate search, to check the library bit for bit.
std::vector<float> reference_qdq(const std::vector<float>& x) {
  static const double kGrid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    double amax = 0;
    bool nan = false;
    for (size_t i = b; i < b + 32; ++i) {
      nan |= std::isnan(x[i]);
      amax = std::max(amax, std::fabs(double(x[i])));
    }
    if (nan) {
      for (size_t i = b; i < b + 32; ++i) out[i] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    uint16_t bits = uint16_t(bits_from_f32(float(amax)) >> 16);  // input is bf16-representable
    double amax_r = bf16_to_f32(uint16_t((bits + 0x20) & 0xFF80));
    double e = std::floor(std::log2(amax_r)) - 2;  // -inf for 0, inf for inf
    e = std::min(127.0, std::max(-127.0, e));
    for (size_t i = b; i < b + 32; ++i) {
      double y = std::fabs(double(x[i])) / std::exp2(e);
      int best = 0;
      for (int c = 1; c < 8; ++c) {
        double d_best = std::fabs(y - kGrid[best]), d = std::fabs(y - kGrid[c]);
        if (d < d_best || (d == d_best && c % 2 == 0)) best = c;
      }
      double v = kGrid[best] * std::exp2(e);
      out[i] = float(std::signbit(x[i]) ? -v : v);
    }
  }
  return out;
}

std::vector<float> qdq(std::vector<float> x) {
  mxfp4_qdq_activation_inplace(x.data(), int64_t(x.size()));
  return x;
}

void expect_bit_equal(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    EXPECT_EQ(bits_from_f32(got[i]), bits_from_f32(want[i])) << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

std::vector<float> block_of(float fill) { return std::vector<float>(32, fill); }

TEST(Mxfp4Codec, NibbleOrderLowFirst) {
  EXPECT_EQ(e2m1_pack(0x1, 0x2), 0x21);
  uint8_t packed[16] = {0x21};  // element 0 = code 1 (0.5), element 1 = code 2 (1.0)
  float out[32];
  mxfp4_dequantize_block(packed, 127, out);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Mxfp4Codec, E8M0Edges) {
  uint8_t packed[16];
  std::fill(packed, packed + 16, uint8_t(0x72));  // codes 2 (1.0) and 7 (6.0)
  float out[32];
  mxfp4_dequantize_block(packed, 0, out);
  EXPECT_EQ(out[0], std::ldexp(1.f, -127));
  EXPECT_EQ(out[1], 6.f * std::ldexp(1.f, -127));
  mxfp4_dequantize_block(packed, 254, out);
  EXPECT_EQ(out[0], std::ldexp(1.f, 127));
  mxfp4_dequantize_block(packed, 255, out);  // NaN scale poisons the whole block (OCP)
  for (float v : out) EXPECT_TRUE(std::isnan(v));
}

TEST(Mxfp4Codec, ScaleExponentRule) {
  EXPECT_EQ(mxfp4_scale_exponent(6.f), 0);       // mantissa 1.5: floor(log2 6) - 2
  EXPECT_EQ(mxfp4_scale_exponent(6.5f), 0);      // 1.625 < 1.75
  EXPECT_EQ(mxfp4_scale_exponent(7.f), 1);       // 1.75 rounds up to 8
  EXPECT_EQ(mxfp4_scale_exponent(4.f), 0);
  EXPECT_EQ(mxfp4_scale_exponent(0.f), -127);
  EXPECT_EQ(mxfp4_scale_exponent(std::ldexp(1.f, -140)), -127);  // clamped
  EXPECT_EQ(mxfp4_scale_exponent(std::numeric_limits<float>::infinity()), 127);
  EXPECT_EQ(mxfp4_scale_exponent(std::ldexp(1.75f, 127)), 127);  // rounds to inf
}

TEST(Mxfp4Activation, TiesAtEveryMidpointGoToEven) {
  // amax 6 gives e_s = 0, so values are their own E2M1 inputs.
  std::vector<float> x = block_of(0.f);
  const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f};
  const float even[7] = {0.f, 1.f, 1.f, 2.f, 2.f, 4.f, 4.f};
  x[0] = 6.f;
  for (int i = 0; i < 7; ++i) {
    x[1 + i] = mids[i];
    x[8 + i] = -mids[i];
  }
  std::vector<float> y = qdq(x);
  EXPECT_EQ(y[0], 6.f);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(y[1 + i], even[i]) << mids[i];
    EXPECT_EQ(y[8 + i], -even[i]) << -mids[i];
  }
  expect_bit_equal(y, reference_qdq(x));
}

TEST(Mxfp4Activation, AmaxRoundUpChangesTheScale) {
  std::vector<float> x = block_of(0.f);
  x[0] = 7.f;    // amax' = 8, e_s = 1: 7/2 = 3.5 ties to 4 -> 8
  x[1] = 0.5f;   // 0.25 at scale 2 ties to 0
  x[2] = 1.5f;   // 0.75 ties to 1 -> 2
  std::vector<float> y = qdq(x);
  EXPECT_EQ(y[0], 8.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 2.f);
  x[0] = 6.5f;   // amax' = 4, e_s = 0: 6.5 saturates to 6
  EXPECT_EQ(qdq(x)[0], 6.f);
}

TEST(Mxfp4Activation, AllEqualBlock) {
  for (float v : {0.3f, -1.0f, 7.0f, 1e-3f, 3e30f}) {
    std::vector<float> x = block_of(round_bf16(v));
    expect_bit_equal(qdq(x), reference_qdq(x));
  }
  std::vector<float> y = qdq(block_of(1.0f));  // 1.0: e_s = -2, code 4 exactly
  EXPECT_EQ(y[31], 1.0f);
}

TEST(Mxfp4Activation, OneOutlierFlushesTheRest) {
  std::vector<float> x = block_of(0.01f);
  x = std::vector<float>(x.begin(), x.end());
  for (auto& v : x) v = round_bf16(v);
  x[17] = 1000.f;
  std::vector<float> y = qdq(x);
  EXPECT_EQ(y[0], 0.f);
  // amax' = 1024 (mantissa 1.95 rounds up), e_s = 8: 1000/256 = 3.9 -> 4 -> 1024.
  EXPECT_EQ(y[17], 1024.f);
  expect_bit_equal(y, reference_qdq(x));
}

TEST(Mxfp4Activation, TinyAndZeroBlocks) {
  std::vector<float> zero = block_of(0.f);
  zero[3] = -0.f;
  std::vector<float> y = qdq(zero);
  EXPECT_EQ(bits_from_f32(y[3]), bits_from_f32(-0.f));
  expect_bit_equal(y, reference_qdq(zero));
  std::vector<float> tiny(32);
  for (int i = 0; i < 32; ++i) tiny[i] = bf16_to_f32(uint16_t(i * 3 + 1));  // bf16 subnormals
  expect_bit_equal(qdq(tiny), reference_qdq(tiny));
  uint8_t packed[16];
  EXPECT_EQ(mxfp4_quantize_block(block_of(0.f).data(), packed), 0);  // smallest scale
}

TEST(Mxfp4Activation, NanPoisonsOnlyItsBlock) {
  std::vector<float> x(64, 1.f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y = qdq(x);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[32], 1.f);
}

TEST(Mxfp4Activation, RandomBlocksAcrossMagnitudesMatchReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-135, 120);
  std::vector<float> x(32 * 4000);
  for (size_t b = 0; b < x.size(); b += 32) {
    int e = exponent(rng);
    for (size_t i = b; i < b + 32; ++i) x[i] = round_bf16(std::ldexp(normal(rng), e));
  }
  expect_bit_equal(qdq(x), reference_qdq(x));
}

TEST(Mxfp4Activation, RandomBf16BitPatternsMatchReference) {
  std::mt19937 rng(11);
  std::vector<float> x(32 * 4000);
  for (auto& v : x) {
    uint16_t bits = uint16_t(rng());
    if ((bits & 0x7F80) == 0x7F80) bits &= 0xBFFF;  // no inf/NaN here
    v = bf16_to_f32(bits);
  }
  std::vector<float> y = qdq(x);
  expect_bit_equal(y, reference_qdq(x));
  for (float v : y) EXPECT_EQ(v, round_bf16(v));  // outputs are exact in bf16
}

TEST(Mxfp4Activation, Bf16EntryPointAgrees) {
  std::mt19937 rng(3);
  std::vector<uint16_t> bits(96);
  std::vector<float> x(96);
  for (size_t i = 0; i < 96; ++i) {
    bits[i] = uint16_t(0x3000 + rng() % 0x1800) ^ (rng() & 0x8000);
    x[i] = bf16_to_f32(bits[i]);
  }
  mxfp4_qdq_activation_inplace_bf16(bits.data(), 96);
  std::vector<float> y = qdq(x);
  for (size_t i = 0; i < 96; ++i) EXPECT_EQ(bf16_to_f32(bits[i]), y[i]);
}

TEST(Mxfp4Activation, RejectsRaggedRows) {
  std::vector<float> x(40, 1.f);
  EXPECT_THROW(mxfp4_qdq_activation_inplace(x.data(), 40), Error);
}

TEST(Mxfp4Matrix, QuantizeDequantizeRoundTrip) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int64_t rows = 6, cols = 96;
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = round_bf16(normal(rng) * 0.05f);
  Mxfp4Matrix m = mxfp4_quantize_matrix(w.data(), rows, cols);
  EXPECT_EQ(m.weight.describe(), "u8[6, 48]");
  EXPECT_EQ(m.scale.describe(), "u8[6, 3]");
  Tensor d = mxfp4_dequantize_matrix(m.weight, m.scale);
  // Dequantized == quantize-dequantize of the same values (one shared rule).
  std::vector<float> expect = reference_qdq(w);
  expect_bit_equal(d.to_f32_vector(), expect);
  // Quantizing the dequantized matrix again reproduces the same bytes.
  Mxfp4Matrix again = mxfp4_quantize_matrix(d.data<float>(), rows, cols);
  EXPECT_EQ(std::memcmp(again.weight.raw(), m.weight.raw(), m.weight.nbytes()), 0);
  EXPECT_EQ(std::memcmp(again.scale.raw(), m.scale.raw(), m.scale.nbytes()), 0);
  EXPECT_THROW(mxfp4_dequantize_matrix(m.weight, m.scale.slice_rows(0, 2)), Error);
}

}  // namespace
}  // namespace mx
