// The FP8 fold of MXFP4 block scales (host/fp8_fold.h): exactness window,
// rounding beyond it, the kernels' fast table and register conversion, the
// K order of the FP8 MMA, and the unfold factor.
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_bits.h"
#include "cuda/host/mxfp4_reference.h"
#include "random_strip_tile.h"

namespace mx::cuda {
namespace {

double folded_value(uint8_t code, int d) { return fp8e4m3_to_f32(fold_code_reference(code, d)); }

TEST(Fp8Fold, EveryCodeAndScaleUnfoldsExactlyInsideTheWindow) {
  // Block scale s inside a row whose maximum is smax, smax - s <= 14: the
  // folded E4M3 value times the row factor is the MXFP4 value itself.
  for (int smax = 0; smax < 255; ++smax)
    for (int s = std::max(0, smax + kFp8FoldMinExactDelta); s <= smax; ++s)
      for (int code = 0; code < 16; ++code) {
        const double want = double(e2m1_value(uint8_t(code))) * std::ldexp(1.0, s - 127);
        const double got = folded_value(uint8_t(code), s - smax) * double(fold_unscale(smax));
        ASSERT_EQ(got, want) << "code " << code << " s " << s << " smax " << smax;
        ASSERT_EQ(std::signbit(got), bool(code & 8)) << code;
      }
}

TEST(Fp8Fold, WindowEndsExactlyAtMinus14) {
  for (int d = -40; d <= 0; ++d) EXPECT_EQ(fold_is_exact(d), d >= kFp8FoldMinExactDelta) << d;
  // c = 6 is the largest shift: 6 * 2^6 = 384 fits E4M3, 6 * 2^7 would not.
  EXPECT_EQ(folded_value(7, 0), 384.0);
  EXPECT_GT(6.0 * 128, 448.0);
}

TEST(Fp8Fold, BeyondTheWindowRoundsToNearestEven) {
  // d = -15: values are E2M1 * 2^-9; E4M3's subnormal step is 2^-9.
  const double step = std::ldexp(1.0, -9);
  EXPECT_EQ(folded_value(1, -15), 0.0);          // 0.5 step: tie -> 0 (even)
  EXPECT_EQ(folded_value(2, -15), step);         // 1 step: exact
  EXPECT_EQ(folded_value(3, -15), 2 * step);     // 1.5 steps: tie -> 2 (even)
  EXPECT_EQ(folded_value(5, -15), 3 * step);     // 3 steps: exact
  EXPECT_EQ(folded_value(9, -15), -0.0);
  EXPECT_TRUE(std::signbit(folded_value(9, -15)));
  for (int d = -30; d < kFp8FoldMinExactDelta; ++d)
    for (int code = 0; code < 8; ++code) {
      const double v = std::ldexp(double(e2m1_value(uint8_t(code))), d + kFp8FoldShift);
      EXPECT_LE(std::fabs(folded_value(uint8_t(code), d) - v), step / 2) << code << " " << d;
    }
  // Far below: everything flushes to (signed) zero.
  for (int code = 0; code < 16; ++code)
    EXPECT_EQ(fold_code_reference(uint8_t(code), -20), (code & 8) ? 0x80 : 0x00) << code;
}

TEST(Fp8Fold, FastTableMatchesTheReferenceWhereValid) {
  for (int d = kFp8FoldFastMinDelta; d <= 0; ++d) {
    uint32_t lo, hi, rlo, rhi;
    fold_table_fast(d, lo, hi);
    fold_table_reference(d, rlo, rhi);
    EXPECT_EQ(lo, rlo) << d;
    EXPECT_EQ(hi, rhi) << d;
  }
  // One below, code 1 (0.5) is a subnormal and the fast formula is wrong:
  // the kernels take the reference path there.
  uint32_t lo, hi, rlo, rhi;
  fold_table_fast(kFp8FoldFastMinDelta - 1, lo, hi);
  fold_table_reference(kFp8FoldFastMinDelta - 1, rlo, rhi);
  EXPECT_NE(lo, rlo);
}

TEST(Fp8Fold, FoldWordPutsEveryCodeOfEveryPositionInItsByte) {
  std::mt19937 rng(7);
  for (int rep = 0; rep < 8; ++rep) {
    const int dg = -int(rng() % 15), dh = -int(rng() % 15);
    uint32_t glo, ghi, hlo, hhi;
    fold_table_reference(dg, glo, ghi);
    fold_table_reference(dh, hlo, hhi);
    for (int c = 0; c < 8; ++c)
      for (int code = 0; code < 16; ++code) {
        // Other codes random, so cross-talk between codes shows.
        const uint32_t w = (uint32_t(rng()) & ~place_code(0xF, c)) | place_code(uint32_t(code), c);
        uint32_t rg, rh;
        fold_word(w, glo, ghi, hlo, hhi, rg, rh);
        const uint32_t reg = (c & 1) ? rh : rg;
        const uint32_t byte = (reg >> (8 * (c / 2))) & 0xFF;
        EXPECT_EQ(byte, fold_code_reference(uint8_t(code), (c & 1) ? dh : dg))
            << "code index " << c << " code " << code;
      }
  }
}

TEST(Fp8Fold, LogicalColumnIsABijectionOfTheTile) {
  std::set<int> seen;
  for (int k = 0; k < kTileK; ++k) seen.insert(fp8_logical_col(k));
  EXPECT_EQ(seen.size(), size_t(kTileK));
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), kTileK - 1);
}

// A strip tile in the kernel layout, turned into FP8 A fragments the way the
// kernel does (lane g, t: word kk -> k32 step kk / 2, registers a0/a1 for kk
// even, a2/a3 for kk odd; byte i = MMA column 4t + i, + 16 for a2/a3), lands
// every weight at its real column's fp8_logical_col with the folded value.
TEST(Fp8Fold, KernelLayoutTileBecomesTheFp8OperandInLogicalOrder) {
  const int K = kTileK;
  const RandomStripTile tile = random_strip_tile(11, 110, 15);
  const std::vector<uint8_t>& code = tile.code;
  const std::vector<uint8_t>& scale = tile.scale;
  const std::vector<int>& smax = tile.smax;
  const std::vector<uint8_t>& layout = tile.layout;
  std::vector<int> a(16 * K, -1);  // A[row][logical column], E4M3 bytes
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3, b = t >> 1;  // lane t's 16 columns: block t / 2
    uint32_t glo, ghi, hlo, hhi;
    fold_table_reference(scale[size_t(g) * 2 + b] - smax[g], glo, ghi);
    fold_table_reference(scale[size_t(g + 8) * 2 + b] - smax[g + 8], hlo, hhi);
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t w = 0;
      for (int j = 0; j < 4; ++j) w |= uint32_t(layout[size_t(lane) * 16 + kk * 4 + j]) << (8 * j);
      uint32_t rg, rh;
      fold_word(w, glo, ghi, hlo, hhi, rg, rh);
      for (int i = 0; i < 4; ++i) {
        const int col = 32 * (kk >> 1) + 16 * (kk & 1) + 4 * t + i;
        a[size_t(g) * K + col] = int((rg >> (8 * i)) & 0xFF);
        a[size_t(g + 8) * K + col] = int((rh >> (8 * i)) & 0xFF);
      }
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < K; ++k) {
      const int d = scale[size_t(r) * 2 + k / 32] - smax[r];
      ASSERT_EQ(a[size_t(r) * K + fp8_logical_col(k)],
                int(fold_code_reference(code[size_t(r) * K + k], d)))
          << "row " << r << " column " << k;
    }
}

TEST(Fp8Fold, FoldedDotProductTimesBothFactorsIsTheMxfp4DotProduct) {
  std::mt19937 rng(3);
  const int K = 256;
  for (int smax_pair : {0, 1, 2}) {
    std::vector<uint8_t> cw(K), cx(K), sw(K / 32), sx(K / 32);
    for (auto& c : cw) c = uint8_t(rng() % 16);
    for (auto& c : cx) c = uint8_t(rng() % 16);
    // Scales near the two ends of E8M0 too (factors become float subnormals).
    const int base_w = smax_pair == 0 ? 120 : smax_pair == 1 ? 10 : 240;
    const int base_x = smax_pair == 0 ? 127 : smax_pair == 1 ? 240 : 5;
    for (auto& s : sw) s = uint8_t(base_w + rng() % 10);
    for (auto& s : sx) s = uint8_t(base_x + rng() % 10);
    const int mw = row_max_scale(sw.data(), K / 32), mx = row_max_scale(sx.data(), K / 32);
    double acc = 0, want = 0;
    for (int k = 0; k < K; ++k) {
      acc += folded_value(cw[k], sw[k / 32] - mw) * folded_value(cx[k], sx[k / 32] - mx);
      want += double(e2m1_value(cw[k])) * std::ldexp(1.0, sw[k / 32] - 127) *
              double(e2m1_value(cx[k])) * std::ldexp(1.0, sx[k / 32] - 127);
    }
    const double got = acc * double(fold_unscale(mw)) * double(fold_unscale(mx));
    EXPECT_NEAR(got, want, std::fabs(want) * 1e-12 + 1e-300) << smax_pair;
  }
}

TEST(Fp8Fold, RowMaxScaleIsTheLargestByte) {
  const uint8_t s[] = {3, 200, 17, 254, 0};
  EXPECT_EQ(row_max_scale(s, 5), 254);
  EXPECT_EQ(row_max_scale(s, 3), 200);
  EXPECT_EQ(row_max_scale(s, 0), 0);
}

}  // namespace
}  // namespace mx::cuda
