// One generated continuation: the prompt plus what has been sampled so far, how
// much of it has KV in the cache, and the KV blocks that hold it. A request
// with n choices has n sequences. The scheduler reads and advances only the
// counters; the block manager owns block_table/block_hashes.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/sampling_params.h"

namespace mx {

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
  int64_t id = 0;
  int32_t choice_index = 0;               // index of this choice within its request
  std::vector<int32_t> tokens;            // prompt, then generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;        // tokens whose KV is in the cache
  std::vector<int32_t> block_table;       // KV blocks covering the computed (+ scheduled) tokens
  std::vector<uint64_t> block_hashes;     // chained hashes of the leading full, computed blocks
  SeqStatus status = SeqStatus::Waiting;
  SamplingParams params;
  std::mt19937_64 rng;                    // per-sequence, so neighbours never shift its draws
  uint64_t seed = 0;                      // what rng was seeded with (a device sampler keys its RNG by it)
  // n > 1: the other choices wait until this sibling's prompt is in the cache,
  // then reuse its blocks through the prefix cache instead of recomputing them.
  std::weak_ptr<const Sequence> prefill_leader;
  int64_t num_preemptions = 0;

  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int64_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  bool prompt_done() const { return num_computed_tokens >= num_prompt_tokens; }
};

using SequencePtr = std::shared_ptr<Sequence>;

}  // namespace mx
