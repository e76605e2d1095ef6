// Paged KV cache bookkeeping: which block holds which tokens of which
// sequence. Full blocks are identified by a hash chained from the previous
// block's hash and their own tokens; a new sequence whose prompt starts with
// cached blocks reuses them (reference counted) after checking the stored
// tokens, so a hash collision can never hand out wrong KV. Free blocks keep
// their contents and are evicted least-recently-freed first.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace mx {

struct PrefixCacheStats {
  int64_t queried_tokens = 0;  // prompt tokens looked up at admission
  int64_t hit_tokens = 0;      // of which found in the cache
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching = true);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return int64_t(blocks_.size()); }
  // Blocks not referenced by any sequence (cached ones included: they can be evicted).
  int64_t num_free_blocks() const { return int64_t(free_list_.size()); }
  int64_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int64_t blocks_for_tokens(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // Cached blocks holding a prefix of seq's tokens (never all of them: the last
  // token is always computed so that it yields logits). No side effects.
  std::vector<int32_t> find_cached_prefix(const Sequence& seq) const;
  // Gives a sequence without blocks the cached prefix blocks plus fresh blocks
  // for up to total_tokens tokens; sets num_computed_tokens to the cached length.
  // Returns false and changes nothing when there are not enough free blocks.
  bool admit(Sequence& seq, const std::vector<int32_t>& cached, int64_t total_tokens);
  // Extends seq's blocks to cover total_tokens; false (no change) when short of blocks.
  bool grow(Sequence& seq, int64_t total_tokens);
  // Registers the hashes of full blocks whose tokens are now all computed.
  void commit_computed(Sequence& seq);
  // Drops seq's references; blocks stay cached until evicted.
  void release(Sequence& seq);

 private:
  struct Block {
    int32_t ref_count = 0;
    uint64_t hash = 0;
    bool hashed = false;
    std::vector<int32_t> tokens;  // the tokens of a hashed block, to verify hits
    std::list<int32_t>::iterator free_pos;
    bool in_free_list = false;
  };
  int32_t take_free_block();
  void reference(int32_t id);
  std::span<const int32_t> block_tokens(const Sequence& seq, int64_t block_index) const;

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_list_;  // front: taken first (unhashed, then least recently freed)
  std::unordered_map<uint64_t, int32_t> cached_;  // hash -> block
  PrefixCacheStats stats_;
};

// Hash of a full block chained from its predecessor's hash (0 for the first).
uint64_t hash_block_tokens(uint64_t parent, std::span<const int32_t> tokens);

}  // namespace mx
