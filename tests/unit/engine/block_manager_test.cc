#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mx {
namespace {

Sequence make_seq(int64_t id, std::vector<int32_t> tokens) {
  Sequence s;
  s.id = id;
  s.num_prompt_tokens = int64_t(tokens.size());
  s.tokens = std::move(tokens);
  return s;
}

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Admits with whatever is cached, marks everything computed, registers hashes.
void admit_and_compute(BlockManager& bm, Sequence& s) {
  auto cached = bm.find_cached_prefix(s);
  ASSERT_TRUE(bm.admit(s, cached, s.num_tokens()));
  s.num_computed_tokens = s.num_tokens();
  bm.commit_computed(s);
}

TEST(BlockManager, AllocatesAndFreesEveryBlock) {
  BlockManager bm(8, 4);
  Sequence a = make_seq(0, iota_tokens(10));
  ASSERT_TRUE(bm.admit(a, {}, 10));
  EXPECT_EQ(a.block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  ASSERT_TRUE(bm.grow(a, 13));
  EXPECT_EQ(a.block_table.size(), 4u);
  EXPECT_TRUE(bm.grow(a, 16));  // still fits in 4 blocks
  EXPECT_EQ(a.block_table.size(), 4u);
  bm.release(a);
  EXPECT_TRUE(a.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST(BlockManager, AdmitFailsWithoutSideEffects) {
  BlockManager bm(3, 4);
  Sequence a = make_seq(0, iota_tokens(13));
  EXPECT_FALSE(bm.admit(a, {}, 13));  // needs 4 blocks
  EXPECT_TRUE(a.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 3);
  Sequence b = make_seq(1, iota_tokens(8));
  ASSERT_TRUE(bm.admit(b, {}, 8));
  EXPECT_FALSE(bm.grow(b, 13));
  EXPECT_EQ(b.block_table.size(), 2u);
}

TEST(BlockManager, ReusesCachedPrefixBlocks) {
  BlockManager bm(16, 4);
  Sequence a = make_seq(0, iota_tokens(13));
  admit_and_compute(bm, a);
  Sequence b = make_seq(1, iota_tokens(14));  // same 13 tokens + one more
  auto cached = bm.find_cached_prefix(b);
  ASSERT_EQ(cached.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(a.block_table.begin(), a.block_table.begin() + 3), cached);
  ASSERT_TRUE(bm.admit(b, cached, 14));
  EXPECT_EQ(b.num_computed_tokens, 12);
  EXPECT_EQ(b.block_table.size(), 4u);
  EXPECT_NE(b.block_table[3], a.block_table[3]);  // the partial block is never shared
  EXPECT_EQ(bm.prefix_stats().hit_tokens, 12);
}

TEST(BlockManager, LeavesTheLastTokenToCompute) {
  BlockManager bm(16, 4);
  Sequence a = make_seq(0, iota_tokens(8));
  admit_and_compute(bm, a);
  Sequence b = make_seq(1, iota_tokens(8));  // identical prompt, exactly 2 blocks
  EXPECT_EQ(bm.find_cached_prefix(b).size(), 1u);  // the last block is recomputed for its logits
}

TEST(BlockManager, HashChainsOverThePrefix) {
  BlockManager bm(16, 4);
  Sequence a = make_seq(0, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  admit_and_compute(bm, a);
  Sequence b = make_seq(1, {9, 9, 9, 9, 5, 6, 7, 8, 9});  // same second block, other first
  EXPECT_TRUE(bm.find_cached_prefix(b).empty());
}

TEST(BlockManager, CountsReferencesOfSharedBlocks) {
  BlockManager bm(6, 4);
  Sequence a = make_seq(0, iota_tokens(9));
  admit_and_compute(bm, a);  // 3 blocks
  Sequence b = make_seq(1, iota_tokens(9));
  admit_and_compute(bm, b);  // shares 2, one fresh
  EXPECT_EQ(bm.num_free_blocks(), 2);
  bm.release(a);
  EXPECT_EQ(bm.num_free_blocks(), 3);  // only a's private tail block
  bm.release(b);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  // Freed blocks stay cached: a third identical prompt still hits.
  Sequence c = make_seq(2, iota_tokens(9));
  EXPECT_EQ(bm.find_cached_prefix(c).size(), 2u);
}

TEST(BlockManager, EvictsLeastRecentlyFreedCachedBlocks) {
  BlockManager bm(4, 2);
  Sequence a = make_seq(0, {1, 1, 2, 2, 0});
  admit_and_compute(bm, a);  // [1 1] [2 2] [0]
  bm.release(a);             // tail first: a's [2 2] is older in the LRU order than its [1 1]
  Sequence b = make_seq(1, {5, 5, 6, 6, 0});
  admit_and_compute(bm, b);  // takes the unhashed block, the spare one, then evicts a's [2 2]
  bm.release(b);
  Sequence a2 = make_seq(2, {1, 1, 2, 2, 0});
  Sequence b2 = make_seq(3, {5, 5, 6, 6, 0});
  EXPECT_EQ(bm.find_cached_prefix(a2).size(), 1u);
  EXPECT_EQ(bm.find_cached_prefix(b2).size(), 2u);
  Sequence c = make_seq(4, {9, 9, 9});
  ASSERT_TRUE(bm.admit(c, {}, 3));  // unhashed block first, then the least recently freed: a's [1 1]
  EXPECT_EQ(bm.find_cached_prefix(a2).size(), 0u);
  EXPECT_EQ(bm.find_cached_prefix(b2).size(), 2u);
}

TEST(BlockManager, SharedBlockIsNotEvictedWhileReferenced) {
  BlockManager bm(3, 2);
  Sequence a = make_seq(0, {1, 1, 2, 2, 3});
  admit_and_compute(bm, a);  // uses all 3 blocks
  Sequence b = make_seq(1, {7, 7, 7});
  EXPECT_FALSE(bm.admit(b, {}, 3));
  bm.release(a);
  ASSERT_TRUE(bm.admit(b, {}, 3));  // evicts two cached blocks
  Sequence a2 = make_seq(2, {1, 1, 2, 2, 3});
  EXPECT_LT(bm.find_cached_prefix(a2).size(), 2u);
}

}  // namespace
}  // namespace mx
