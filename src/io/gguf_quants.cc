#include "io/gguf_quants.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"

namespace mx::gguf {
namespace {

constexpr int kBlock = 32;

float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void q4_0_block(const uint8_t* b, uint16_t* out) {
  float d = read_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = f32_to_bf16(float(int(qs[j] & 0xf) - 8) * d);
    out[j + 16] = f32_to_bf16(float(int(qs[j] >> 4) - 8) * d);
  }
}

void q4_1_block(const uint8_t* b, uint16_t* out) {
  float d = read_f16(b), m = read_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = f32_to_bf16(float(qs[j] & 0xf) * d + m);
    out[j + 16] = f32_to_bf16(float(qs[j] >> 4) * d + m);
  }
}

void q8_0_block(const uint8_t* b, uint16_t* out) {
  float d = read_f16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kBlock; ++j) out[j] = f32_to_bf16(float(qs[j]) * d);
}

void mxfp4_block(const uint8_t* b, uint16_t* out) {
  float s = e8m0_to_f32(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    out[j] = f32_to_bf16(e2m1_to_f32(qs[j] & 0xf) * s);
    out[j + 16] = f32_to_bf16(e2m1_to_f32(qs[j] >> 4) * s);
  }
}

}  // namespace

void dequantize_to_bf16(uint32_t ggml_type, const uint8_t* blocks, int64_t n, uint16_t* out) {
  MX_CHECK(n % kBlock == 0, "{} elements are not whole blocks", n);
  void (*decode)(const uint8_t*, uint16_t*) = nullptr;
  size_t block_bytes = 0;
  switch (GgmlType(ggml_type)) {
    case GgmlType::Q4_0: decode = q4_0_block, block_bytes = 18; break;
    case GgmlType::Q4_1: decode = q4_1_block, block_bytes = 20; break;
    case GgmlType::Q8_0: decode = q8_0_block, block_bytes = 34; break;
    case GgmlType::MXFP4: decode = mxfp4_block, block_bytes = 17; break;
    default: fail("dequantize_to_bf16: {} is not a block format", ggml_type_name(ggml_type));
  }
  for (int64_t i = 0; i < n / kBlock; ++i) decode(blocks + size_t(i) * block_bytes, out + i * kBlock);
}

void mxfp4_to_engine(const uint8_t* blocks, int64_t n, uint8_t* packed, uint8_t* scales) {
  MX_CHECK(n % kBlock == 0, "{} elements are not whole MXFP4 blocks", n);
  for (int64_t i = 0; i < n / kBlock; ++i) {
    const uint8_t* b = blocks + size_t(i) * 17;
    scales[i] = b[0];
    uint8_t codes[kBlock];
    for (int j = 0; j < 16; ++j) {
      codes[j] = b[1 + j] & 0xf;
      codes[j + 16] = b[1 + j] >> 4;
    }
    uint8_t* dst = packed + i * (kBlock / 2);
    for (int j = 0; j < kBlock / 2; ++j) dst[j] = uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));
  }
}

}  // namespace mx::gguf
