// The fused MoE's automatic path (cuda/host/moe_path_rule.h): where each path
// starts on the measured Kimi-K2.5 shape, and that a shape path 5 cannot take
// never gets it.
#include <gtest/gtest.h>

#include "cuda/host/moe_path_rule.h"

namespace mx::cuda {
namespace {

constexpr int kKimiExperts = 384, kKimiTopk = 8, kKimiH = 7168, kKimiI = 2048;

int kimi_path(int tokens) { return choose_path(tokens * kKimiTopk, kKimiExperts, kKimiH, kKimiI); }

TEST(MoePathRule, KimiTakesDirectThenRoutedThenWarpSpecialized) {
  EXPECT_EQ(kimi_path(1), kDirectPath);
  EXPECT_EQ(kimi_path(2), kDirectPath);  // 16 pairs: the direct path's limit
  EXPECT_EQ(kimi_path(3), kRouted);
  EXPECT_EQ(kimi_path(40), kRouted);
  EXPECT_EQ(kimi_path(384), kRouted);  // measured: routed 3.9 ms, path 5 4.9
  EXPECT_EQ(kimi_path(479), kRouted);
  EXPECT_EQ(kimi_path(480), kWsPath);  // 10 pairs per expert
  EXPECT_EQ(kimi_path(512), kWsPath);  // measured: 4.77 vs 4.87 ms
  EXPECT_EQ(kimi_path(768), kWsPath);  // 4.8 vs 6.7 ms
  EXPECT_EQ(kimi_path(1024), kWsPath);  // 4.9 vs 8.7 ms
  EXPECT_EQ(kimi_path(8192), kWsPath);
}

TEST(MoePathRule, ShapesPathFiveCannotTakeNeverGetIt) {
  const int I = 1344;  // 2I = 2688: a multiple of 128, not of 256
  ASSERT_FALSE(ws_path_takes(64, 4096, I));
  for (int pairs : {17, 640, 2047, 2048, 100000}) {
    const int path = choose_path(pairs, 64, 4096, I);
    EXPECT_NE(path, kWsPath) << pairs;
    // The mma.sync prefill tiles from 32 pairs per expert, as before session 13.
    EXPECT_EQ(path, pairs >= 32 * 64 ? kPrefillPath : kRouted) << pairs;
  }
  // H not a multiple of 256, and 2I not even a multiple of 128: routed throughout.
  EXPECT_EQ(choose_path(100000, 64, 4000, 1000), kRouted);
  // More experts than path 5's tile map has threads.
  EXPECT_FALSE(ws_path_takes(kWsMaxExperts + 1, kKimiH, kKimiI));
  EXPECT_NE(choose_path(1 << 24, kWsMaxExperts + 1, kKimiH, kKimiI), kWsPath);
  EXPECT_TRUE(ws_path_takes(kWsMaxExperts, kKimiH, kKimiI));
}

}  // namespace
}  // namespace mx::cuda
