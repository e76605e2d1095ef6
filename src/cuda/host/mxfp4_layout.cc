#include "cuda/host/mxfp4_layout.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {

namespace {

void check_shapes(size_t code_bytes, size_t scale_bytes, int64_t N, int64_t K, const char* what) {
  if (N <= 0 || K <= 0 || N % kStripRows != 0 || K % kTileK != 0)
    fail_input("{}: MXFP4 kernel layout needs N % {} == 0 and K % {} == 0, got N={} K={}", what,
               kStripRows, kTileK, N, K);
  if (code_bytes != size_t(N * K / 2))
    fail_input("{}: expected {} code bytes for [{}, {}/2], got {}", what, N * K / 2, N, K,
               code_bytes);
  if (scale_bytes != size_t(N * K / kBlockK))
    fail_input("{}: expected {} scale bytes for [{}, {}/32], got {}", what, N * K / kBlockK, N, K,
               scale_bytes);
}

// The code bytes hold little-endian 32-bit words (the kernels load them so).
void or_word(std::vector<uint8_t>& bytes, int64_t at, uint32_t bits) {
  for (int j = 0; j < 4; ++j) bytes[size_t(at + j)] |= uint8_t(bits >> (8 * j));
}
uint32_t word_at(const std::vector<uint8_t>& bytes, int64_t at) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j) w |= uint32_t(bytes[size_t(at + j)]) << (8 * j);
  return w;
}

}  // namespace

PackedMxfp4 pack_mxfp4(std::span<const uint8_t> codes, std::span<const uint8_t> scales,
                       int64_t N, int64_t K, const char* what) {
  check_shapes(codes.size(), scales.size(), N, K, what);
  PackedMxfp4 p;
  p.rows = N;
  p.cols = K;
  p.codes.assign(codes.size(), 0);
  p.scales.assign(scales.size(), 0);
  const int64_t KB = K / kBlockK;
  for (int64_t r = 0; r < N; ++r) {
    for (int64_t kb = 0; kb < KB; ++kb) {
      const uint8_t s = scales[r * KB + kb];
      if (s == kE8m0Nan)
        fail_input("{}: E8M0 scale 255 (NaN) at row {} block {}: NaN blocks are not supported",
                   what, r, kb);
      p.big_scales |= s > kMaxSimpleScale;
      p.scales[kernel_scale_slot(r, kb, K)] = s;
    }
    const uint8_t* row = codes.data() + r * (K / 2);
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t code = (row[k / 2] >> (4 * (k & 1))) & 0xF;
      const CodeSlot slot = kernel_code_slot(r, k, K);
      or_word(p.codes, slot.word_byte, place_code(code, slot.code));
    }
  }
  return p;
}

void unpack_mxfp4(const PackedMxfp4& p, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales) {
  const int64_t N = p.rows, K = p.cols, KB = K / kBlockK;
  codes.assign(size_t(N * K / 2), 0);
  scales.assign(size_t(N * KB), 0);
  for (int64_t r = 0; r < N; ++r) {
    for (int64_t kb = 0; kb < KB; ++kb) scales[r * KB + kb] = p.scales[kernel_scale_slot(r, kb, K)];
    for (int64_t k = 0; k < K; ++k) {
      const CodeSlot slot = kernel_code_slot(r, k, K);
      const uint8_t code = uint8_t(code_of(word_at(p.codes, slot.word_byte), slot.code));
      codes[r * (K / 2) + k / 2] |= uint8_t(code << (4 * (k & 1)));
    }
  }
}

std::vector<int64_t> gate_up_interleaved_rows(int64_t intermediate) {
  if (intermediate <= 0 || intermediate % 8 != 0)
    fail_input("gate_up: intermediate size must be a positive multiple of 8, got {}", intermediate);
  std::vector<int64_t> order(size_t(2 * intermediate));
  for (int64_t s = 0; s < intermediate / 8; ++s)
    for (int64_t i = 0; i < 8; ++i) {
      order[size_t(16 * s + i)] = 8 * s + i;                     // gate row
      order[size_t(16 * s + 8 + i)] = intermediate + 8 * s + i;  // up row
    }
  return order;
}

void permute_rows(std::span<const uint8_t> codes, std::span<const uint8_t> scales, int64_t N,
                  int64_t K, std::span<const int64_t> order, std::vector<uint8_t>& codes_out,
                  std::vector<uint8_t>& scales_out) {
  if (int64_t(order.size()) != N) fail_input("permute_rows: order has {} rows, weight {}", order.size(), N);
  const size_t cb = size_t(K / 2), sb = size_t(K / kBlockK);
  if (codes.size() != N * cb || scales.size() != N * sb)
    fail_input("permute_rows: buffer sizes do not match [{}, {}]", N, K);
  codes_out.resize(codes.size());
  scales_out.resize(scales.size());
  for (int64_t r = 0; r < N; ++r) {
    const int64_t src = order[size_t(r)];
    if (src < 0 || src >= N) fail_input("permute_rows: row {} maps to {} outside [0, {})", r, src, N);
    std::copy_n(codes.begin() + src * cb, cb, codes_out.begin() + r * cb);
    std::copy_n(scales.begin() + src * sb, sb, scales_out.begin() + r * sb);
  }
}

}  // namespace mx::cuda
