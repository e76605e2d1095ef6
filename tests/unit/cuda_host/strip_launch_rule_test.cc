// The dense MXFP4 GEMM's host-side launch rules (cuda/host/strip_launch_rule.h):
// programmatic dependent launch and the L2 prefetch of the strip kernels, and
// which weights take the strip-pair kernel at 9..16 tokens.
#include <gtest/gtest.h>

#include "cuda/host/strip_launch_rule.h"

namespace mx::cuda {
namespace {

TEST(StripLaunchRule, PdlUpTo16TokensExceptKernel8WithTwoPrefetchedTiles) {
  for (int kernel : {1, 2, 5, 6, 9, 12})
    for (int M : {1, 8, 16}) {
      const StripLaunch sl = choose_strip_launch(0, 0, kernel, M);
      EXPECT_TRUE(sl.pdl) << "kernel " << kernel << " M " << M;
      EXPECT_EQ(sl.prefetch_tiles, 2);
    }
  for (auto [kernel, M] : {std::pair{8, 1}, std::pair{8, 16}, std::pair{1, 17}, std::pair{5, 64}}) {
    const StripLaunch sl = choose_strip_launch(0, 0, kernel, M);
    EXPECT_FALSE(sl.pdl) << "kernel " << kernel << " M " << M;
    EXPECT_EQ(sl.prefetch_tiles, 0) << "a plain launch prefetches nothing by default";
  }
}

TEST(StripLaunchRule, ForcedValuesWin) {
  EXPECT_TRUE(choose_strip_launch(1, 0, 8, 1).pdl);
  EXPECT_EQ(choose_strip_launch(1, 0, 8, 1).prefetch_tiles, 2);
  EXPECT_FALSE(choose_strip_launch(-1, 0, 1, 1).pdl);
  EXPECT_EQ(choose_strip_launch(-1, 4, 1, 1).prefetch_tiles, 4) << "a forced count prefetches without PDL too";
  EXPECT_EQ(choose_strip_launch(0, -1, 1, 1).prefetch_tiles, 0);
  EXPECT_EQ(choose_strip_launch(0, 8, 5, 8).prefetch_tiles, 8);
}

TEST(StripLaunchRule, StripPairKernelOnTheMeasuredShapes) {
  struct Case {
    int64_t rows, cols;
    bool pair;
  };
  // Taken: the large dense weights, MLA o_proj, the expert down (a tie, kept);
  // not: 4096x7168 (128 pairs, measured slower) and MLA q_b_proj (K < 2048).
  for (const Case& c : {Case{36864, 7168, true}, Case{7168, 18432, true}, Case{7168, 8192, true},
                        Case{7168, 2048, true}, Case{4096, 7168, false}, Case{12288, 1536, false}}) {
    for (int M : {9, 12, 16}) EXPECT_EQ(strip_pair_by_rule(c.rows, c.cols, M), c.pair) << c.rows << "x" << c.cols;
    for (int M : {1, 8, 17, 64}) EXPECT_FALSE(strip_pair_by_rule(c.rows, c.cols, M)) << "M " << M;
  }
}

}  // namespace
}  // namespace mx::cuda
