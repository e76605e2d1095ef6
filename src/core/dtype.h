// Element types of checkpoints and kernels, with exact scalar conversions.
// Packed types: E2M1x2 holds two FP4 codes per byte (element 2j in the low
// nibble); E8M0 is a power-of-two scale 2^(e-127) with e=255 meaning NaN.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mx {

enum class DType : uint8_t {
  F64, F32, F16, BF16, F8E4M3, F8E5M2, E2M1x2, E8M0,
  I64, I32, I16, I8, U8, BOOL,
};

// Bytes per stored element (E2M1x2: per byte holding two values).
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// safetensors dtype strings ("BF16", "F8_E4M3", "U8", ...). Throws on unknown.
DType dtype_from_safetensors(std::string_view s);
std::string_view dtype_to_safetensors(DType t);

// ---- scalar conversions (all exact where the target can hold the value) ----
inline float f32_from_bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = bits_from_f32(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
  b += 0x7fffu + ((b >> 16) & 1u);
  return uint16_t(b >> 16);
}
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, overflow -> inf

// FP8 E4M3 (OCP "fn": no inf, 0x7f/0xff NaN, max 448). Encoding saturates to
// +-448 and rounds to nearest even.
float fp8e4m3_to_f32(uint8_t v);
uint8_t f32_to_fp8e4m3(float f);
float fp8e5m2_to_f32(uint8_t v);

// FP4 E2M1 code (low 4 bits) -> value in {0,.5,1,1.5,2,3,4,6} with sign.
inline float e2m1_to_f32(uint8_t code) {
  static constexpr float kLut[16] = {0.f,  0.5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                     -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  return kLut[code & 0xf];
}
// Round-half-even to the nearest E2M1 value, saturating at +-6.
uint8_t f32_to_e2m1(float f);

// E8M0 scale byte -> 2^(e-127); e = 255 -> NaN (OCP MX v1.0).
float e8m0_to_f32(uint8_t e);

}  // namespace mx
