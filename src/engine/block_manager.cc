#include "engine/block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace mx {

uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens) {
  // splitmix64 finalizer over (parent, tokens): cheap and well mixed; hits are
  // verified against the stored tokens, so collisions only cost a miss.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent ^ 0x6a09e667f3bcc908ull);
  for (int32_t t : tokens) h = mix(h ^ uint32_t(t));
  return h;
}

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), blocks_(size_t(num_blocks)) {
  MX_CHECK(num_blocks > 0 && block_size > 0, "need blocks, got {} blocks of {} tokens", num_blocks, block_size);
  for (int32_t i = 0; i < int32_t(num_blocks); ++i) {
    blocks_[size_t(i)].free_pos = free_list_.insert(free_list_.end(), i);
    blocks_[size_t(i)].in_free_list = true;
  }
}

std::span<const int32_t> BlockManager::block_tokens(const Sequence& seq, int64_t block_index) const {
  return std::span<const int32_t>(seq.tokens).subspan(size_t(block_index * block_size_), size_t(block_size_));
}

std::vector<int32_t> BlockManager::find_cached_prefix(const Sequence& seq) const {
  std::vector<int32_t> hits;
  if (!prefix_caching_) return hits;
  const int64_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  uint64_t hash = 0;
  for (int64_t b = 0; b < max_blocks; ++b) {
    auto tokens = block_tokens(seq, b);
    hash = hash_block_tokens(hash, tokens);
    auto it = cached_.find(hash);
    if (it == cached_.end()) break;
    const Block& block = blocks_[size_t(it->second)];
    if (!std::equal(tokens.begin(), tokens.end(), block.tokens.begin(), block.tokens.end())) break;
    hits.push_back(it->second);
  }
  return hits;
}

bool BlockManager::admit(Sequence& seq, const std::vector<int32_t>& cached, int64_t total_tokens) {
  MX_CHECK(seq.block_table.empty(), "sequence {} already holds blocks", seq.id);
  const int64_t cached_tokens = int64_t(cached.size()) * block_size_;
  MX_CHECK(total_tokens > cached_tokens, "admission of sequence {} computes nothing", seq.id);
  const int64_t fresh = blocks_for_tokens(total_tokens) - int64_t(cached.size());
  int64_t cached_free = 0;  // hits sitting in the free list stop being free
  for (int32_t id : cached) cached_free += blocks_[size_t(id)].ref_count == 0;
  if (fresh > num_free_blocks() - cached_free) return false;

  uint64_t hash = 0;
  for (size_t b = 0; b < cached.size(); ++b) {
    reference(cached[b]);
    seq.block_table.push_back(cached[b]);
    hash = hash_block_tokens(hash, block_tokens(seq, int64_t(b)));
    seq.block_hashes.push_back(hash);
  }
  for (int64_t i = 0; i < fresh; ++i) seq.block_table.push_back(take_free_block());
  seq.num_computed_tokens = cached_tokens;
  stats_.queried_tokens += seq.num_tokens();
  stats_.hit_tokens += cached_tokens;
  return true;
}

bool BlockManager::grow(Sequence& seq, int64_t total_tokens) {
  const int64_t missing = blocks_for_tokens(total_tokens) - int64_t(seq.block_table.size());
  if (missing <= 0) return true;
  if (missing > num_free_blocks()) return false;
  for (int64_t i = 0; i < missing; ++i) seq.block_table.push_back(take_free_block());
  return true;
}

void BlockManager::commit_computed(Sequence& seq) {
  if (!prefix_caching_) return;
  const int64_t full = std::min(seq.num_computed_tokens / block_size_, int64_t(seq.block_table.size()));
  for (int64_t b = int64_t(seq.block_hashes.size()); b < full; ++b) {
    auto tokens = block_tokens(seq, b);
    const uint64_t parent = b == 0 ? 0 : seq.block_hashes[size_t(b - 1)];
    const uint64_t hash = hash_block_tokens(parent, tokens);
    seq.block_hashes.push_back(hash);
    Block& block = blocks_[size_t(seq.block_table[size_t(b)])];
    if (block.hashed || cached_.count(hash)) continue;  // a twin computed the same tokens first
    block.hashed = true;
    block.hash = hash;
    block.tokens.assign(tokens.begin(), tokens.end());
    cached_.emplace(hash, seq.block_table[size_t(b)]);
  }
}

void BlockManager::release(Sequence& seq) {
  // Tail blocks first, so that a prompt's leading blocks, the most shareable
  // ones, are the last to be evicted.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& block = blocks_[size_t(*it)];
    MX_CHECK(block.ref_count > 0, "block {} released more often than referenced", *it);
    if (--block.ref_count > 0) continue;
    // Unhashed blocks hold nothing reusable: hand them out before cached ones.
    block.free_pos = block.hashed ? free_list_.insert(free_list_.end(), *it) : free_list_.insert(free_list_.begin(), *it);
    block.in_free_list = true;
  }
  seq.block_table.clear();
  seq.block_hashes.clear();
}

int32_t BlockManager::take_free_block() {
  MX_CHECK(!free_list_.empty(), "no free KV block");
  const int32_t id = free_list_.front();
  Block& block = blocks_[size_t(id)];
  if (block.hashed) {  // evict: its contents are about to be overwritten
    cached_.erase(block.hash);
    block.hashed = false;
    block.tokens.clear();
  }
  reference(id);
  return id;
}

void BlockManager::reference(int32_t id) {
  Block& block = blocks_[size_t(id)];
  if (block.in_free_list) {
    free_list_.erase(block.free_pos);
    block.in_free_list = false;
  }
  ++block.ref_count;
}

}  // namespace mx
