// The dense W4A4 FP8 kernel's weight layout (host/fp8_dense_layout.h): the
// lane repack from the MXFP4 kernel layout, the 7-instruction word
// conversion, the per-row table constants, and that a whole strip tile turns
// into the FP8 A fragments with every weight at its MMA column, folded.
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/host/fp8_dense_layout.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_bits.h"
#include "random_strip_tile.h"

namespace mx::cuda {
namespace {

TEST(Fp8DenseLayout, MmaColumnIsABijectionOfTheTile) {
  std::set<int> seen;
  for (int k = 0; k < kTileK; ++k) seen.insert(fp8_dense_mma_col(k));
  EXPECT_EQ(seen.size(), size_t(kTileK));
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), kTileK - 1);
  // A lane's 16 real columns stay inside one 32-block (its scale byte).
  for (int k = 0; k < kTileK; ++k) EXPECT_EQ(fp8_dense_mma_col(k) / 32, (k >> 3) & 1) << k;
}

TEST(Fp8DenseLayout, SlotsPartitionTheLaneBits) {
  uint32_t used[4] = {};
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 16; ++j) {
      const Fp8DenseSlot sl = fp8_dense_slot(h, j);
      const uint32_t bits = (7u << sl.mag_bit) | (1u << sl.sign_bit);
      EXPECT_EQ(used[sl.word] & bits, 0u) << h << " " << j;
      used[sl.word] |= bits;
    }
  for (uint32_t u : used) EXPECT_EQ(u, 0xFFFFFFFFu);
}

TEST(Fp8DenseLayout, RowTableConstantsGiveTheFastTable) {
  for (int smax = 0; smax < 255; ++smax)
    for (int s = std::max(0, smax + kFp8FoldFastMinDelta); s <= smax; ++s) {
      uint32_t lo, hi;
      fold_table_fast(s - smax, lo, hi);
      ASSERT_EQ(uint32_t(s) * kFp8DenseLoStep + fp8_dense_lo_base(smax), lo) << s << " " << smax;
      ASSERT_EQ(uint32_t(s) * kFp8DenseHiStep + fp8_dense_hi_base(smax), hi) << s << " " << smax;
    }
}

// Every code at every position of a word, the other codes random: the two
// registers hold exactly the folded bytes of the word's codes.
TEST(Fp8DenseLayout, WordConversionFoldsEveryCodeAtEveryPosition) {
  std::mt19937 rng(5);
  for (int d = kFp8FoldFastMinDelta; d <= 0; ++d) {
    uint32_t lo, hi;
    fold_table_fast(d, lo, hi);
    for (int j = 0; j < 8; ++j)  // word-local: register half r = j / 4, byte i = j % 4
      for (int code = 0; code < 16; ++code) {
        const Fp8DenseSlot sl = fp8_dense_slot(0, j);
        const uint32_t mask = (7u << sl.mag_bit) | (1u << sl.sign_bit);
        const uint32_t w = (uint32_t(rng()) & ~mask) | (uint32_t(code & 7) << sl.mag_bit) |
                           (uint32_t(code >> 3) << sl.sign_bit);
        uint32_t r0, r1;
        fp8_dense_word_to_e4m3(w, lo, hi, r0, r1);
        const uint32_t reg = j < 4 ? r0 : r1;
        ASSERT_EQ((reg >> (8 * (j & 3))) & 0xFF, fold_code_reference(uint8_t(code), d))
            << "d " << d << " position " << j << " code " << code;
      }
  }
}

// A strip tile packed in the MXFP4 kernel layout, repacked lane by lane and
// converted as the kernel does (word 2s + h -> step s, registers a0/a2 for
// row g, a1/a3 for row g + 8; byte i = MMA column 32s + 4t + i, + 16 for
// a2/a3): every weight lands at fp8_dense_mma_col of its real column with
// its folded value.
TEST(Fp8DenseLayout, KernelLayoutTileBecomesTheFp8OperandInMmaOrder) {
  const int K = kTileK;
  const RandomStripTile tile = random_strip_tile(13, 112, 12);
  const std::vector<uint8_t>& code = tile.code;
  const std::vector<uint8_t>& scale = tile.scale;
  const std::vector<int>& smax = tile.smax;
  const std::vector<uint8_t>& layout = tile.layout;
  std::vector<int> a(16 * K, -1);  // A[row][MMA column], E4M3 bytes
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3, b = t >> 1;
    uint32_t in[4], out[4];
    for (int kk = 0; kk < 4; ++kk) {
      in[kk] = 0;
      for (int j = 0; j < 4; ++j) in[kk] |= uint32_t(layout[size_t(lane) * 16 + kk * 4 + j]) << (8 * j);
    }
    fp8_dense_repack_lane(in, out);
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h, s_b = scale[size_t(row) * 2 + b];
      const uint32_t lo = uint32_t(s_b) * kFp8DenseLoStep + fp8_dense_lo_base(smax[row]);
      const uint32_t hi = uint32_t(s_b) * kFp8DenseHiStep + fp8_dense_hi_base(smax[row]);
      for (int s = 0; s < 2; ++s) {
        uint32_t r0, r1;
        fp8_dense_word_to_e4m3(out[2 * s + h], lo, hi, r0, r1);
        for (int i = 0; i < 4; ++i) {
          a[size_t(row) * K + 32 * s + 4 * t + i] = int((r0 >> (8 * i)) & 0xFF);
          a[size_t(row) * K + 32 * s + 16 + 4 * t + i] = int((r1 >> (8 * i)) & 0xFF);
        }
      }
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < K; ++k) {
      const int d = scale[size_t(r) * 2 + k / 32] - smax[r];
      ASSERT_EQ(a[size_t(r) * K + fp8_dense_mma_col(k)], int(fold_code_reference(code[size_t(r) * K + k], d)))
          << "row " << r << " column " << k;
    }
}

// pack_fp8_dense_device counts only blocks with a nonzero code as beyond the
// fold table: a block of zeros (any signs) is found as such, one nonzero code
// anywhere in a block is found.
TEST(Fp8DenseLayout, BlocksOfZerosAreTold) {
  RandomStripTile tile = random_strip_tile(17, 112, 12);
  const int K = kTileK;
  auto repack = [&] { tile.layout = pack_strip_tile(tile.code); };
  for (int i = 0; i < 32; ++i) tile.code[size_t(5) * K + 32 + i] = uint8_t((i & 1) << 3);  // row 5, block 1: +-0
  repack();
  for (int r = 0; r < 16; ++r)
    for (int kb = 0; kb < 2; ++kb) {
      bool any = false;
      for (int i = 0; i < 32; ++i) any |= (tile.code[size_t(r) * K + kb * 32 + i] & 7) != 0;
      EXPECT_EQ(kernel_block_has_magnitude(tile.layout.data(), r, kb, K), any) << r << " " << kb;
    }
  EXPECT_FALSE(kernel_block_has_magnitude(tile.layout.data(), 5, 1, K));
  for (int i = 0; i < 32; ++i) {
    tile.code[size_t(5) * K + 32 + i] = 1;  // one 0.5 at position i
    repack();
    EXPECT_TRUE(kernel_block_has_magnitude(tile.layout.data(), 5, 1, K)) << i;
    tile.code[size_t(5) * K + 32 + i] = 0;
  }
}

}  // namespace
}  // namespace mx::cuda
