#include "cuda/host/mxfp4_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"

namespace mx::cuda {

float e2m1_value(uint8_t code) {
  static constexpr float kMag[8] = {0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float m = kMag[code & 7];
  return (code & 8) ? -m : m;
}

float e8m0_value(uint8_t e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(e) - 127);
}

float dequant_element(const uint8_t* codes, const uint8_t* scales, int64_t K, int64_t r,
                      int64_t k) {
  const uint8_t byte = codes[size_t(r * (K / 2) + k / 2)];
  const uint8_t code = (k & 1) ? (byte >> 4) : (byte & 0xF);
  return e2m1_value(code) * e8m0_value(scales[size_t(r * (K / 32) + k / 32)]);
}

uint8_t round_to_e2m1_magnitude(float v) {
  // Midpoints between grid neighbours; at a tie the even code (mantissa bit 0)
  // wins: 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2, 2.5->2, 3.5->4, 5->4.
  if (v <= 0.25f) return 0;
  if (v < 0.75f) return 1;
  if (v <= 1.25f) return 2;
  if (v < 1.75f) return 3;
  if (v <= 2.5f) return 4;
  if (v < 3.5f) return 5;
  if (v <= 5.0f) return 6;
  return 7;
}

QuantizedBlock quantize_block_reference(const uint16_t* x) {
  uint16_t amax_bits = 0;
  for (int i = 0; i < 32; ++i) amax_bits = std::max<uint16_t>(amax_bits, x[i] & 0x7FFF);
  const uint32_t rounded = (uint32_t(amax_bits) + 0x20u) & 0xFF80u;
  const int exp_field = int(rounded >> 7);
  const int e_s = std::clamp(exp_field - 127 - 2, -127, 127);
  QuantizedBlock q;
  q.scale = uint8_t(e_s + 127);
  for (int i = 0; i < 32; ++i) {
    const float v = std::fabs(bf16_to_f32(x[i])) * std::ldexp(1.0f, -e_s);
    const uint8_t sign = (x[i] & 0x8000) ? 8 : 0;
    q.codes[i] = uint8_t(sign | round_to_e2m1_magnitude(v));
  }
  return q;
}

void qdq_block_reference(const uint16_t* x, uint16_t* out) {
  const QuantizedBlock q = quantize_block_reference(x);
  const float scale = std::ldexp(1.0f, int(q.scale) - 127);
  for (int i = 0; i < 32; ++i) out[i] = f32_to_bf16(e2m1_value(q.codes[i]) * scale);
}

}  // namespace mx::cuda
