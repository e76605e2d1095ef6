// The stream-K partition of the dense ring kernel (src/cuda/host/streamk_ranges.h):
// the kernel's fix-up protocol replayed on the CPU for the benched shapes and
// small ones, so that a row block is never left waiting for a segment that
// no CTA delivers.
#include "cuda/host/streamk_ranges.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace mx::cuda {
namespace {

// What the kernel does at the end of each row block's segment, per CTA:
// whole row blocks go to y, partial ones arrive on the row block's counter
// in a slot; returns false (with a message) where the protocol breaks.
::testing::AssertionResult replay(int blocks, int stages, int ctas) {
  const int units = blocks * stages;
  std::map<int, int> arrivals;                 // row block -> partial segments
  std::map<int, int> covered;                  // row block -> units seen
  std::set<std::pair<int, int>> slots_taken;   // (cta, slot)
  for (int c = 0; c < ctas; ++c) {
    const int u0 = streamk_start(c, units, ctas), u1 = streamk_start(c + 1, units, ctas);
    for (int seg0 = u0; seg0 < u1;) {
      const int rb = seg0 / stages, seg1 = std::min(u1, (rb + 1) * stages);
      covered[rb] += seg1 - seg0;
      if (seg1 - seg0 < stages) {
        ++arrivals[rb];
        const int slot = streamk_slot(c, rb, units, ctas, stages);
        // Slot 0 belongs to the segment that opens the CTA's range, slot 1 to
        // the one that closes it inside a later row block.
        if ((slot == 0) != (seg0 == u0))
          return ::testing::AssertionFailure() << "CTA " << c << " puts its segment at unit " << seg0 << " in slot "
                                               << slot << " (its range starts at " << u0 << ")";
        if (!slots_taken.insert({c, slot}).second)
          return ::testing::AssertionFailure() << "CTA " << c << " uses slot " << slot << " twice";
      }
      seg0 = seg1;
    }
  }
  for (int rb = 0; rb < blocks; ++rb) {
    if (covered[rb] != stages) return ::testing::AssertionFailure() << "row block " << rb << " covered " << covered[rb];
    const int c0 = streamk_cta_of(rb * stages, units, ctas), c1 = streamk_cta_of((rb + 1) * stages - 1, units, ctas);
    // The last arrival is the one that sees c1 - c0 earlier ones.
    const int expected = c1 == c0 ? 0 : c1 - c0 + 1;
    if (arrivals[rb] != expected)
      return ::testing::AssertionFailure() << "row block " << rb << ": " << arrivals[rb] << " partial segments, "
                                           << "the fix-up waits for " << expected;
  }
  return ::testing::AssertionSuccess();
}

TEST(StreamKRanges, EveryUnitBelongsToTheCtaThatCountsIt) {
  for (int units : {1, 7, 64, 896, 8064, 16128})
    for (int resident : {1, 5, 132, 264, 396}) {
      const int ctas = streamk_grid(resident, units);
      ASSERT_LE(ctas, units);
      for (int c = 0; c < ctas; ++c)
        EXPECT_LT(streamk_start(c, units, ctas), streamk_start(c + 1, units, ctas)) << units << " / " << ctas;
      for (int u = 0; u < units; ++u) {
        const int c = streamk_cta_of(u, units, ctas);
        ASSERT_LE(streamk_start(c, units, ctas), u);
        ASSERT_GT(streamk_start(c + 1, units, ctas), u) << "unit " << u << " of " << units << ", " << ctas << " CTAs";
      }
    }
}

TEST(StreamKRanges, EveryCutRowBlockGetsExactlyTheArrivalsItWaitsFor) {
  // (row blocks, stages): 36864x7168 and 7168x18432 (128-row blocks, 2-tile
  // stages), their 256-row variants, expert-sized and small ones.
  const std::vector<std::pair<int, int>> shapes = {{288, 56}, {56, 144}, {144, 56}, {28, 144}, {32, 56},
                                                   {56, 16},  {16, 56},  {8, 8},    {8, 16},   {1, 8}};
  for (auto [blocks, stages] : shapes)
    for (int resident : {132, 264, 396}) {
      const int ctas = streamk_grid(resident, blocks * stages);
      EXPECT_TRUE(replay(blocks, stages, ctas)) << blocks << " x " << stages << ", " << ctas << " CTAs";
    }
}

TEST(StreamKRanges, GridLargerThanTheUnitsWouldLeaveARowBlockWaiting) {
  // Why streamk_grid clamps: 64 units over 264 CTAs gives CTAs with empty
  // ranges, which the fix-up counts as segments that never arrive.
  EXPECT_FALSE(replay(8, 8, 264));
  EXPECT_EQ(streamk_grid(264, 64), 64);
  EXPECT_EQ(streamk_grid(264, 16128), 264);
  EXPECT_EQ(streamk_grid(264, 0), 1);
}

}  // namespace
}  // namespace mx::cuda
