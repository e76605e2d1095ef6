// A random strip tile (16 rows x one 64-wide K tile) of MXFP4 codes and
// scales, packed into the kernel layout (host/mxfp4_bits.h): the input of the
// tests that convert a tile the way a kernel does (fp8_fold_test.cc,
// fp8_dense_layout_test.cc).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {

struct RandomStripTile {
  std::vector<uint8_t> code;    // [16][64] E2M1 codes (sign in bit 3)
  std::vector<uint8_t> scale;   // [16][2] block scale bytes
  std::vector<int> smax;        // [16] each row's largest scale byte
  std::vector<uint8_t> layout;  // kTileCodeBytes: the tile in the kernel layout
};

// A strip tile's codes ([16][64]) in the kernel layout (kTileCodeBytes).
inline std::vector<uint8_t> pack_strip_tile(const std::vector<uint8_t>& code) {
  std::vector<uint8_t> layout(kTileCodeBytes, 0);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < kTileK; ++k) {
      const CodeSlot sl = kernel_code_slot(r, k, kTileK);
      const uint32_t bits = place_code(code[size_t(r) * kTileK + k], sl.code);
      for (int j = 0; j < 4; ++j) layout[size_t(sl.word_byte + j)] |= uint8_t(bits >> (8 * j));
    }
  return layout;
}

// Scales drawn from [scale_lo, scale_lo + scale_span).
inline RandomStripTile random_strip_tile(uint32_t seed, int scale_lo, int scale_span) {
  std::mt19937 rng(seed);
  const int K = kTileK;
  RandomStripTile t{std::vector<uint8_t>(16 * K), std::vector<uint8_t>(16 * 2), std::vector<int>(16),
                    std::vector<uint8_t>(kTileCodeBytes, 0)};
  for (auto& c : t.code) c = uint8_t(rng() % 16);
  for (auto& s : t.scale) s = uint8_t(scale_lo + int(rng() % uint32_t(scale_span)));
  for (int r = 0; r < 16; ++r) t.smax[r] = row_max_scale(&t.scale[size_t(r) * 2], 2);
  t.layout = pack_strip_tile(t.code);
  return t;
}

}  // namespace mx::cuda
