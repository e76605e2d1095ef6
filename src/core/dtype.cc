#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace mx {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  std::string_view name;
  std::string_view safetensors;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F64, 8, "f64", "F64"},         {DType::F32, 4, "f32", "F32"},
    {DType::F16, 2, "f16", "F16"},         {DType::BF16, 2, "bf16", "BF16"},
    {DType::F8E4M3, 1, "f8e4m3", "F8_E4M3"}, {DType::F8E5M2, 1, "f8e5m2", "F8_E5M2"},
    {DType::E2M1x2, 1, "e2m1x2", "F4"},    {DType::E8M0, 1, "e8m0", "E8M0"},
    {DType::I64, 8, "i64", "I64"},         {DType::I32, 4, "i32", "I32"},
    {DType::I16, 2, "i16", "I16"},         {DType::I8, 1, "i8", "I8"},
    {DType::U8, 1, "u8", "U8"},            {DType::BOOL, 1, "bool", "BOOL"},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i;
  fail("unknown dtype {}", int(t));
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::string_view dtype_to_safetensors(DType t) { return info(t).safetensors; }

DType dtype_from_safetensors(std::string_view s) {
  for (const auto& i : kInfo)
    if (i.safetensors == s) return i.type;
  if (s == "F8_E8M0") return DType::E8M0;
  fail_input("unsupported safetensors dtype '{}'", s);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t b = bits_from_f32(f);
  uint16_t sign = uint16_t((b >> 16) & 0x8000);
  uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504 -> inf
  if (abs < 0x38800000u) {                       // subnormal or zero in f16
    // value * 2^24 rounded to nearest even integer gives the mantissa.
    float v = std::nearbyint(f32_from_bits(abs) * 16777216.0f);
    return sign | uint16_t(v);
  }
  uint32_t exp = ((abs >> 23) - 112) << 10;
  uint32_t man = abs & 0x7fffff;
  uint32_t r = exp | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
  return sign | uint16_t(r);
}

float fp8e4m3_to_f32(uint8_t v) {
  uint32_t sign = v & 0x80;
  uint32_t exp = (v >> 3) & 0xf;
  uint32_t man = v & 7;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  float r = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), int(exp) - 10);
  return sign ? -r : r;
}

uint8_t f32_to_fp8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;
  // Smallest normal is 2^-6; subnormal step 2^-9. Round to a grid of the
  // value's binade with nearbyint (round-half-even in the default mode).
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5,1)
  int exp = std::max(e - 1, -6);
  float step = std::ldexp(1.f, exp - 3);
  float q = std::nearbyint(a / step) * step;
  if (q >= 448.f) return sign | 0x7e;
  if (q == 0.f) return sign;
  int qe;
  std::frexp(q, &qe);
  int ue = qe - 1;
  if (ue < -6) return sign | uint8_t(std::lround(q / std::ldexp(1.f, -9)));
  uint8_t man = uint8_t(std::lround(q / std::ldexp(1.f, ue - 3))) - 8;
  return sign | uint8_t((ue + 7) << 3) | man;
}

float fp8e5m2_to_f32(uint8_t v) { return f16_to_f32(uint16_t(v) << 8); }

uint8_t f32_to_e2m1(float f) {
  // Midpoints between {0,.5,1,1.5,2,3,4,6}: ties go to the even code.
  uint8_t sign = std::signbit(f) ? 8 : 0;
  float a = std::fabs(f);
  if (std::isnan(a)) return sign | 7;
  static constexpr float kVals[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  uint8_t best = 7;
  for (uint8_t c = 0; c < 7; ++c) {
    float mid = 0.5f * (kVals[c] + kVals[c + 1]);
    if (a < mid) { best = c; break; }
    if (a == mid) { best = (c & 1) ? c + 1 : c; break; }
  }
  return sign | best;
}

float e8m0_to_f32(uint8_t e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.f, int(e) - 127);
}

}  // namespace mx
