#include "core/dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace mx {

TEST(DType, Bf16RoundTripIsExactForBf16Values) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f), h) << h;
  }
}

TEST(DType, Bf16RoundsHalfToEven) {
  // 1 + 2^-8 is halfway between 1 and 1+2^-7: ties to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1+2^-6).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.f, -8))), 1.0f + std::ldexp(1.f, -6));
}

TEST(DType, F16RoundTripIsExactForF16Values) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));
}

TEST(DType, Fp8E4M3RoundTripAndSaturation) {
  for (uint32_t v = 0; v < 256; ++v) {
    float f = fp8e4m3_to_f32(uint8_t(v));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_fp8e4m3(f), v) << v << " " << f;
  }
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(f32_to_fp8e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_fp8e4m3(-1e6f), 0xfe);
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0x7f)));
  // 1.0625 is halfway between 1.0 and 1.125: ties to even mantissa (1.0).
  EXPECT_EQ(fp8e4m3_to_f32(f32_to_fp8e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(fp8e4m3_to_f32(f32_to_fp8e4m3(1.1875f)), 1.25f);
}

TEST(DType, E2M1TableAndRounding) {
  const float vals[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(e2m1_to_f32(uint8_t(c)), vals[c]);
    EXPECT_EQ(e2m1_to_f32(uint8_t(c | 8)), -vals[c]);
    EXPECT_EQ(f32_to_e2m1(vals[c]), c);
  }
  // Ties to even codes: 0.25->0, 0.75->1.0(code 2), 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4
  EXPECT_EQ(f32_to_e2m1(0.25f), 0);
  EXPECT_EQ(f32_to_e2m1(0.75f), 2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 6);
  EXPECT_EQ(f32_to_e2m1(100.f), 7);
  EXPECT_EQ(f32_to_e2m1(-100.f), 15);
}

TEST(DType, E8M0Scale) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.f, 127));
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.f, -127));
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
}

TEST(DType, SafetensorsNames) {
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::BF16);
  EXPECT_EQ(dtype_from_safetensors("F8_E4M3"), DType::F8E4M3);
  EXPECT_THROW(dtype_from_safetensors("Q7"), std::exception);
}

}  // namespace mx
