// The stream-K partition of the dense ring kernel (src/cuda/host/streamk_ranges.h):
// the kernel's fix-up protocol replayed on the CPU for the benched shapes and
// small ones, so that a row block is never left waiting for a segment that
// no CTA delivers.
#include "cuda/host/streamk_ranges.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace mx::cuda {
namespace {

// What the kernel does at the end of each row block's segment, per CTA
// (end_segment in mxfp4_gemm_ws.cu): whole row blocks go to y; of a cut row
// block, the owner's segment must be the last of its range and each
// contributor's the first of its range (its one partial slot), and the owner
// waits for exactly the contributors' counts, all from CTAs after it (so the
// waits cannot form a cycle). Returns false (with a message) where the
// protocol breaks.
::testing::AssertionResult replay(int blocks, int stages, int ctas) {
  const int units = blocks * stages;
  std::map<int, int> counts;   // row block -> contributors' counts
  std::map<int, int> covered;  // row block -> units seen
  std::map<int, int> owned;    // row block -> owners seen
  for (int c = 0; c < ctas; ++c) {
    const int u0 = streamk_start(c, units, ctas), u1 = streamk_start(c + 1, units, ctas);
    for (int seg0 = u0; seg0 < u1;) {
      const int rb = seg0 / stages, seg1 = std::min(u1, (rb + 1) * stages);
      covered[rb] += seg1 - seg0;
      if (seg1 - seg0 < stages) {
        if (seg0 == rb * stages) {
          ++owned[rb];
          if (c != streamk_owner(rb, units, ctas, stages))
            return ::testing::AssertionFailure() << "CTA " << c << " sums row block " << rb << ", its owner is "
                                                 << streamk_owner(rb, units, ctas, stages);
          if (seg1 != u1)
            return ::testing::AssertionFailure() << "CTA " << c << " owns row block " << rb << " before the end of "
                                                 << "its range (unit " << seg1 << " of " << u1 << ")";
        } else {
          ++counts[rb];
          if (seg0 != u0)
            return ::testing::AssertionFailure() << "CTA " << c << " contributes to row block " << rb << " at unit "
                                                 << seg0 << ", not where its range (and its one slot) starts, " << u0;
          if (streamk_owner(rb, units, ctas, stages) >= c)
            return ::testing::AssertionFailure() << "row block " << rb << "'s owner does not come before CTA " << c;
        }
      }
      seg0 = seg1;
    }
  }
  for (int rb = 0; rb < blocks; ++rb) {
    if (covered[rb] != stages) return ::testing::AssertionFailure() << "row block " << rb << " covered " << covered[rb];
    const int c0 = streamk_owner(rb, units, ctas, stages), c1 = streamk_cta_of((rb + 1) * stages - 1, units, ctas);
    // The owner waits for c1 - c0 counts.
    if (counts[rb] != c1 - c0 || owned[rb] != (c1 == c0 ? 0 : 1))
      return ::testing::AssertionFailure() << "row block " << rb << ": " << counts[rb] << " counts and "
                                           << owned[rb] << " owners, the owner waits for " << c1 - c0;
  }
  return ::testing::AssertionSuccess();
}

// The kernel's segment ends (end_segment) as events per CTA, with its exact
// conditions: a contributor (range starting inside a row block) releases its
// count at the end of its next segment, or at once when its range ends in
// that row block; an owner waits. Then every CTA is run, all resident, until
// none can move: each must finish, each cut row block get its c1 - c0 counts
// once from each contributor, and no CTA wait before its own release.
::testing::AssertionResult run_to_completion(int blocks, int stages, int ctas) {
  const int units = blocks * stages;
  struct Event {
    bool wait;
    int rb;
  };
  std::vector<std::vector<Event>> events(ctas);
  for (int c = 0; c < ctas; ++c) {
    const int u0 = streamk_start(c, units, ctas), u1 = streamk_start(c + 1, units, ctas);
    const int first_rb = u0 / stages;
    const bool contributes = u0 % stages != 0;
    for (int seg0 = u0; seg0 < u1;) {
      const int rb = seg0 / stages, seg1 = std::min(u1, (rb + 1) * stages);
      if (contributes && rb == first_rb + 1) events[c].push_back({false, first_rb});
      if (seg1 - seg0 < stages) {
        if (seg0 == rb * stages) events[c].push_back({true, rb});
        else if (seg1 == u1) events[c].push_back({false, rb});
      }
      seg0 = seg1;
    }
    bool waited = false;
    int releases = 0;
    for (const Event& e : events[c]) {
      if (e.wait) waited = true;
      else if (waited) return ::testing::AssertionFailure() << "CTA " << c << " releases after its own wait";
      else ++releases;
    }
    if (releases != (contributes ? 1 : 0))
      return ::testing::AssertionFailure() << "CTA " << c << " releases " << releases << " counts";
  }
  std::vector<size_t> next(ctas, 0);
  std::map<int, int> counted;
  for (bool moved = true; moved;) {
    moved = false;
    for (int c = 0; c < ctas; ++c)
      while (next[c] < events[c].size()) {
        const Event& e = events[c][next[c]];
        if (e.wait && counted[e.rb] != streamk_cta_of((e.rb + 1) * stages - 1, units, ctas) - c) break;
        if (!e.wait) ++counted[e.rb];
        ++next[c], moved = true;
      }
  }
  for (int c = 0; c < ctas; ++c)
    if (next[c] != events[c].size())
      return ::testing::AssertionFailure() << "CTA " << c << " never finishes (waits for row block "
                                           << events[c][next[c]].rb << ")";
  return ::testing::AssertionSuccess();
}

TEST(StreamKRanges, EveryGridFinishesWithTheKernelsReleases) {
  for (int blocks = 1; blocks <= 40; ++blocks)
    for (int stages = 1; stages <= 40; ++stages)
      for (int resident : {1, 2, 7, 64, 132, 264, 300}) {
        const int ctas = streamk_grid(resident, blocks * stages);
        ASSERT_TRUE(run_to_completion(blocks, stages, ctas)) << blocks << " x " << stages << ", " << ctas << " CTAs";
      }
  for (auto [blocks, stages] : std::vector<std::pair<int, int>>{{288, 56}, {144, 56}, {56, 144}, {8, 512}})
    for (int resident : {78, 114, 132, 264, 396})
      EXPECT_TRUE(run_to_completion(blocks, stages, streamk_grid(resident, blocks * stages)));
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

TEST(StreamKRanges, EveryCutRowBlockGetsExactlyTheCountsItsOwnerWaitsFor) {
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
