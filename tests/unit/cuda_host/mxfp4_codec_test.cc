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

// The placement of docs/kernels.md, written out here rather than taken from
// code_bit: word bits of code c = r + 4 * half (mantissa, e0, e1, sign).
constexpr int kDocumentedBits[8][4] = {{6, 7, 8, 15},   {2, 3, 4, 11},   {28, 29, 30, 5},
                                       {0, 1, 26, 9},   {22, 23, 24, 31}, {18, 19, 20, 27},
                                       {12, 13, 14, 21}, {16, 17, 10, 25}};

uint32_t place_documented(uint32_t code, int c) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= ((code >> i) & 1u) << kDocumentedBits[c][i];
  return w;
}

// What the kernel does with code index c of a word: BF16x2 bits of E2M1 *
// 2^-126 (register c & 3, half c >> 2), then a BF16 multiply by 2^(s-1) (two
// multiplies for s > 128). Emulated in float, which is exact here (BF16
// products of a 2-bit mantissa and a power of two).
float kernel_dequant(uint32_t word, int c, uint8_t s) {
  uint32_t bits[4];
  e2m1_word_bits(word, bits);
  const float v = bf16_to_f32(uint16_t(bits[c & 3] >> (16 * (c >> 2))));
  if (s <= kMaxSimpleScale) return v * bf16_to_f32(scale_multiplier_bits(s));
  return v * bf16_to_f32(scale_multiplier_bits(kMaxSimpleScale)) *
         bf16_to_f32(big_scale_second_bits(s));
}

TEST(Mxfp4Codec, CodeBitsAreTheDocumentedPlacement) {
  for (int c = 0; c < 8; ++c)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(code_bit(c, i), kDocumentedBits[c][i]) << c << " " << i;
}

// Every code at every code index of a word, with every scale; the other 7
// codes random, so bits leaking between codes show.
TEST(Mxfp4Codec, RegisterDequantIsExactForEveryCodePositionAndScale) {
  std::mt19937 rng(5);
  for (int s = 0; s < 255; ++s)
    for (int c = 0; c < 8; ++c)
      for (int code = 0; code < 16; ++code) {
        const uint32_t word =
            (uint32_t(rng()) & ~place_documented(0xF, c)) | place_documented(uint32_t(code), c);
        const float want = e2m1_value(uint8_t(code)) * e8m0_value(uint8_t(s));
        const float got = kernel_dequant(word, c, uint8_t(s));
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << "code " << code << " at " << c << " scale " << s;
        ASSERT_EQ(got, want) << "code " << code << " at " << c << " scale " << s;
      }
}

TEST(Mxfp4Codec, EveryRegisterOfAWordPicksItsTwoCodes) {
  // Code index c holds code c + 1 (index 7 -> 8 = -0): register r = {r, r+4}.
  uint32_t word = 0;
  for (int c = 0; c < 8; ++c) word |= place_documented(uint32_t(c + 1) & 0xF, c);
  uint32_t bits[4];
  e2m1_word_bits(word, bits);
  for (int r = 0; r < 4; ++r) {
    const float lo = bf16_to_f32(uint16_t(bits[r])) * std::ldexp(1.f, 126);
    const float hi = bf16_to_f32(uint16_t(bits[r] >> 16)) * std::ldexp(1.f, 126);
    EXPECT_EQ(lo, e2m1_value(uint8_t(r + 1)));
    EXPECT_EQ(hi, e2m1_value(uint8_t((r + 5) & 0xF)));
    EXPECT_EQ(bits[r] & ~kBf16CodeMask, 0u) << "register " << r << " has stray bits";
  }
  EXPECT_TRUE(std::signbit(bf16_to_f32(uint16_t(bits[3] >> 16))));  // -0 keeps its sign
}

TEST(Mxfp4Codec, CodesRoundTripThroughTheirWordBits) {
  std::mt19937 rng(9);
  for (int it = 0; it < 1000; ++it) {
    const uint32_t word = uint32_t(rng());
    uint32_t rebuilt = 0;
    for (int c = 0; c < 8; ++c) rebuilt |= place_code(code_of(word, c), c);
    ASSERT_EQ(rebuilt, word);
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
