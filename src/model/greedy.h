// Greedy generation of one sequence over a model's paged cache: what
// `mxserve generate` runs and what the golden tests compare token for token.
#pragma once
#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace mx {

struct GreedyOptions {
  int64_t max_new_tokens = 16;
  int64_t block_size = 16;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one step
  KvCacheDtype kv_dtype = KvCacheDtype::Auto;
  std::vector<int64_t> stop_ids;  // generation ends after emitting one of these
};

struct GreedyResult {
  std::vector<int32_t> tokens;            // the continuation
  std::vector<float> prompt_logits;       // logits after the last prompt token
  std::vector<std::vector<float>> step_logits;  // logits that chose each continuation token
  double prompt_seconds = 0, decode_seconds = 0;
};

// Allocates a cache big enough for the prompt plus max_new_tokens, prefills
// (in chunks when asked) and decodes greedily (argmax, lowest id on ties).
GreedyResult greedy_generate(CausalLM& model, const std::vector<int32_t>& prompt, const GreedyOptions& options);

int32_t argmax(const float* logits, int64_t n);

}  // namespace mx
