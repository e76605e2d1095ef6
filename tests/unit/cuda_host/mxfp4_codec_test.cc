// The register tricks of mxfp4_bits.h and the reference quantizer, on the CPU.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "cuda/host/mxfp4_bits.h"
#include "cuda/host/mxfp4_reference.h"

namespace mx::cuda {
namespace {

// What the kernel does with one register: BF16x2 bits of E2M1 * 2^-126, then a
// BF16 multiply by 2^(s-1) (two multiplies for s > 128). Emulated in float,
// which is exact here (BF16 products of a 2-bit mantissa and a power of two).
float kernel_dequant(uint8_t code, uint8_t s, bool high_half) {
  const uint32_t word = high_half ? uint32_t(code) << 16 : uint32_t(code);  // nibble 0 / 4
  const uint32_t bits = e2m1_pair_bits(word, 0);
  const float v = bf16_to_f32(uint16_t(high_half ? bits >> 16 : bits & 0xFFFF));
  if (s <= kMaxSimpleScale) return v * bf16_to_f32(scale_multiplier_bits(s));
  return v * bf16_to_f32(scale_multiplier_bits(kMaxSimpleScale)) *
         bf16_to_f32(big_scale_second_bits(s));
}

TEST(Mxfp4Codec, RegisterDequantIsExactForEveryCodeAndScale) {
  for (int s = 0; s < 255; ++s)
    for (int code = 0; code < 16; ++code)
      for (bool hi : {false, true}) {
        const float want = e2m1_value(uint8_t(code)) * e8m0_value(uint8_t(s));
        const float got = kernel_dequant(uint8_t(code), uint8_t(s), hi);
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << code << " " << s;
        ASSERT_EQ(got, want) << "code " << code << " scale " << s;
      }
}

TEST(Mxfp4Codec, EveryRegisterOfAWordPicksItsTwoNibbles) {
  // Nibble n holds code n + 1 (nibble 7 -> 8 = -0): register r = {r, r+4}.
  uint32_t word = 0;
  for (int n = 0; n < 8; ++n) word |= uint32_t((n + 1) & 0xF) << (4 * n);
  for (int r = 0; r < 4; ++r) {
    const uint32_t bits = e2m1_pair_bits(word, r);
    const float lo = bf16_to_f32(uint16_t(bits)) * std::ldexp(1.f, 126);
    const float hi = bf16_to_f32(uint16_t(bits >> 16)) * std::ldexp(1.f, 126);
    EXPECT_EQ(lo, e2m1_value(uint8_t(r + 1)));
    EXPECT_EQ(hi, e2m1_value(uint8_t((r + 5) & 0xF)));
  }
}

TEST(Mxfp4Codec, E8m0EdgeValues) {
  EXPECT_EQ(e8m0_value(127), 1.0f);
  EXPECT_EQ(e8m0_value(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_value(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_value(255)));
}

TEST(Mxfp4Codec, RoundingTiesGoToTheEvenCode) {
  EXPECT_EQ(round_to_e2m1_magnitude(0.25f), 0);
  EXPECT_EQ(round_to_e2m1_magnitude(0.2500001f), 1);
  EXPECT_EQ(round_to_e2m1_magnitude(0.75f), 2);
  EXPECT_EQ(round_to_e2m1_magnitude(1.25f), 2);
  EXPECT_EQ(round_to_e2m1_magnitude(1.75f), 4);
  EXPECT_EQ(round_to_e2m1_magnitude(2.5f), 4);
  EXPECT_EQ(round_to_e2m1_magnitude(3.5f), 6);
  EXPECT_EQ(round_to_e2m1_magnitude(5.0f), 6);
  EXPECT_EQ(round_to_e2m1_magnitude(5.01f), 7);
  EXPECT_EQ(round_to_e2m1_magnitude(1e30f), 7);
}

std::vector<uint16_t> block_of(float v) { return std::vector<uint16_t>(32, f32_to_bf16(v)); }

TEST(Mxfp4Codec, QuantizerScaleFromRoundedAmax) {
  // amax 6.0 (mantissa 1.5 < 1.75): 2^2 -> e_s = 0, and 6 is exactly code 7.
  auto b = block_of(1.0f);
  b[5] = f32_to_bf16(6.0f);
  QuantizedBlock q = quantize_block_reference(b.data());
  EXPECT_EQ(q.scale, 127);
  EXPECT_EQ(q.codes[5], 7);
  EXPECT_EQ(q.codes[0], 2);  // 1.0
  // amax 7.0 (mantissa 1.75): rounds up to 8 -> e_s = 1; 7/2 = 3.5 ties to 4.
  b[5] = f32_to_bf16(7.0f);
  q = quantize_block_reference(b.data());
  EXPECT_EQ(q.scale, 128);
  EXPECT_EQ(q.codes[5], 6);
  EXPECT_EQ(q.codes[0], 1);  // 1.0 / 2 = 0.5
}

TEST(Mxfp4Codec, QuantizerZeroAndTinyBlocks) {
  auto z = block_of(0.0f);
  QuantizedBlock q = quantize_block_reference(z.data());
  EXPECT_EQ(q.scale, 0);
  for (uint8_t c : q.codes) EXPECT_EQ(c, 0);
  // Subnormal-range values: scale clamps at 2^-127, values stay exact multiples.
  auto t = block_of(std::ldexp(1.0f, -130));
  std::vector<uint16_t> out(32);
  qdq_block_reference(t.data(), out.data());
  EXPECT_EQ(q.scale, 0);
  EXPECT_EQ(bf16_to_f32(out[0]), 0.0f);  // 2^-130 / 2^-127 = 1/8 -> rounds to 0
}

TEST(Mxfp4Codec, QuantizerOneOutlierFlushesSmallValues) {
  auto b = block_of(0.01f);
  b[0] = f32_to_bf16(-100.0f);  // amax 100 -> 128 -> e_s = 5, step 16
  std::vector<uint16_t> out(32);
  qdq_block_reference(b.data(), out.data());
  EXPECT_EQ(bf16_to_f32(out[0]), -96.0f);  // 100/32 = 3.125 -> 3 -> 96
  EXPECT_EQ(bf16_to_f32(out[1]), 0.0f);
}

TEST(Mxfp4Codec, QdqIsIdempotent) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int it = 0; it < 200; ++it) {
    std::vector<uint16_t> x(32), y(32), z(32);
    for (auto& v : x) v = f32_to_bf16(nd(rng));
    qdq_block_reference(x.data(), y.data());
    qdq_block_reference(y.data(), z.data());
    // A second pass can only pick a smaller scale when amax shrank; values on
    // the grid of the first pass stay representable, so the result is equal.
    for (int i = 0; i < 32; ++i) EXPECT_EQ(bf16_to_f32(y[i]), bf16_to_f32(z[i]));
  }
}

}  // namespace
}  // namespace mx::cuda
