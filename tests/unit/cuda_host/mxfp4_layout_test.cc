#include "cuda/host/mxfp4_layout.h"

#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {
namespace {

struct RawWeight {
  std::vector<uint8_t> codes, scales;
};

RawWeight random_weight(int64_t N, int64_t K, uint32_t seed, int smin = 100, int smax = 140) {
  std::mt19937 rng(seed);
  RawWeight w;
  w.codes.resize(size_t(N * K / 2));
  w.scales.resize(size_t(N * K / 32));
  for (auto& c : w.codes) c = uint8_t(rng());
  std::uniform_int_distribution<int> sd(smin, smax);
  for (auto& s : w.scales) s = uint8_t(sd(rng));
  return w;
}

TEST(Mxfp4Layout, PackThenUnpackGivesTheCheckpointBack) {
  const int64_t N = 48, K = 192;
  RawWeight w = random_weight(N, K, 1);
  PackedMxfp4 p = pack_mxfp4(w.codes, w.scales, N, K);
  std::vector<uint8_t> codes, scales;
  unpack_mxfp4(p, codes, scales);
  EXPECT_EQ(codes, w.codes);
  EXPECT_EQ(scales, w.scales);
  EXPECT_TRUE(p.big_scales);  // scales up to 140 > 128
}

TEST(Mxfp4Layout, CodeSlotsAreABijection) {
  const int64_t N = 32, K = 128;
  std::vector<int> seen(size_t(N * K), 0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < K; ++k) {
      CodeSlot s = kernel_code_slot(r, k, K);
      ASSERT_GE(s.word_byte, 0);
      ASSERT_LT(s.word_byte, N * K / 2);
      ASSERT_EQ(s.word_byte % 4, 0);
      ASSERT_GE(s.code, 0);
      ASSERT_LT(s.code, 8);
      ++seen[size_t(s.word_byte / 4 * 8 + s.code)];
    }
  for (int v : seen) EXPECT_EQ(v, 1);
}

// The documented placement, checked on concrete elements rather than through
// the function under test: lane (g, t) = 4g + t, word kk, register r.
TEST(Mxfp4Layout, LanesHoldTheirMmaFragment) {
  const int64_t K = 128;
  // Row 3 (g = 3, low row), k = 16*2 + 4*1 + 0 (t = 2, kk = 1, a0 low half):
  // lane 14, word 1, code 0.
  CodeSlot s = kernel_code_slot(3, 36, K);
  EXPECT_EQ(s.word_byte, 14 * 16 + 1 * 4);
  EXPECT_EQ(s.code, 0);
  // Row 11 (g = 3, high row), k = 39 (t = 2, kk = 1, pos 3: a3 high half):
  // code 3 + 4 = 7 of the same word.
  s = kernel_code_slot(11, 39, K);
  EXPECT_EQ(s.word_byte, 14 * 16 + 4);
  EXPECT_EQ(s.code, 7);
  // Second k-tile of strip 1 (rows 16..31): tile index 1 * 2 + 1 = 3.
  s = kernel_code_slot(16, 64, K);
  EXPECT_EQ(s.word_byte, 3 * 512);
  EXPECT_EQ(s.code, 0);
  // Scales: row 11 block 3 (tile 1, b = 1) -> 32 + 16 + 2*3 + 1.
  EXPECT_EQ(kernel_scale_slot(11, 3, K), 32 + 16 + 6 + 1);
}

// pack_mxfp4 puts a code's bits where docs/kernels.md says: code 7 of a word
// (a3 high half) at bits {16, 17, 10, 25} (mantissa, e0, e1, sign).
TEST(Mxfp4Layout, PackPlacesTheCodeBitsOfTheDocumentedTable) {
  const int64_t N = 16, K = 64;
  std::vector<uint8_t> codes(size_t(N * K / 2), 0), scales(size_t(N * K / 32), 127);
  codes[size_t(11 * (K / 2) + 39 / 2)] = uint8_t(0xB << 4);  // row 11, column 39 (odd: high nibble)
  PackedMxfp4 p = pack_mxfp4(codes, scales, N, K);
  const size_t at = 14 * 16 + 4;  // lane 14, word 1
  uint32_t word = 0;
  for (int j = 0; j < 4; ++j) word |= uint32_t(p.codes[at + j]) << (8 * j);
  EXPECT_EQ(word, (1u << 16) | (1u << 17) | (1u << 25));  // 0xB = -1.5: m = 1, e0 = 1, e1 = 0, sign
  for (size_t b = 0; b < p.codes.size(); ++b) {
    if (b >= at && b < at + 4) continue;
    ASSERT_EQ(p.codes[b], 0) << "byte " << b;
  }
}

TEST(Mxfp4Layout, RefusesNanScalesAndBadShapes) {
  RawWeight w = random_weight(16, 64, 2);
  w.scales[1] = 255;
  EXPECT_THROW(pack_mxfp4(w.codes, w.scales, 16, 64), InvalidArgument);
  RawWeight v = random_weight(16, 96, 3);
  EXPECT_THROW(pack_mxfp4(v.codes, v.scales, 16, 96), InvalidArgument);  // K % 64
  RawWeight u = random_weight(8, 64, 4);
  EXPECT_THROW(pack_mxfp4(u.codes, u.scales, 8, 64), InvalidArgument);   // N % 16
  RawWeight x = random_weight(16, 64, 5);
  x.codes.pop_back();
  EXPECT_THROW(pack_mxfp4(x.codes, x.scales, 16, 64), InvalidArgument);
}

TEST(Mxfp4Layout, SmallScalesDoNotNeedTheBigScalePath) {
  RawWeight w = random_weight(16, 64, 6, 0, 128);
  EXPECT_FALSE(pack_mxfp4(w.codes, w.scales, 16, 64).big_scales);
}

TEST(Mxfp4Layout, GateUpRowsInterleaveByEight) {
  std::vector<int64_t> order = gate_up_interleaved_rows(16);
  ASSERT_EQ(order.size(), 32u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[7], 7);
  EXPECT_EQ(order[8], 16);   // first up row
  EXPECT_EQ(order[15], 23);
  EXPECT_EQ(order[16], 8);   // second strip: gate rows 8..15
  EXPECT_EQ(order[24], 24);
  EXPECT_THROW(gate_up_interleaved_rows(12), InvalidArgument);
}

TEST(Mxfp4Layout, PermuteRowsMovesCodesAndScalesTogether) {
  RawWeight w = random_weight(32, 64, 7);
  std::vector<int64_t> order = gate_up_interleaved_rows(16);
  std::vector<uint8_t> c, s;
  permute_rows(w.codes, w.scales, 32, 64, order, c, s);
  for (int64_t r = 0; r < 32; ++r) {
    EXPECT_EQ(c[size_t(r * 32)], w.codes[size_t(order[size_t(r)] * 32)]);
    EXPECT_EQ(s[size_t(r * 2 + 1)], w.scales[size_t(order[size_t(r)] * 2 + 1)]);
  }
}

}  // namespace
}  // namespace mx::cuda

namespace mx::cuda {
namespace {

TEST(Mxfp4Layout, SourceFunctionsInvertTheSlots) {
  const int64_t N = 32, K = 192;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < K; ++k) {
      CodeSlot s = kernel_code_slot(r, k, K);
      int64_t r2 = -1, k2 = -1;
      kernel_code_source(s.word_byte, s.code, K, r2, k2);
      ASSERT_EQ(r2, r);
      ASSERT_EQ(k2, k);
    }
  for (int64_t r = 0; r < N; ++r)
    for (int64_t kb = 0; kb < K / 32; ++kb) {
      int64_t r2 = -1, kb2 = -1;
      kernel_scale_source(kernel_scale_slot(r, kb, K), K, r2, kb2);
      ASSERT_EQ(r2, r);
      ASSERT_EQ(kb2, kb);
    }
}

}  // namespace
}  // namespace mx::cuda
