// The seed's "random" dataset (benchmark_serving's sample_random_requests),
// drawn from numpy default_rng(seed) in the same order as the Python tool, so
// the same --seed and tokenizer give the same prompts:
//   1. a shared prefix: integers(0, vocab, prefix_len)        (when prefix_len > 0)
//   2. input lengths:   integers(int(in_len * ratio), in_len + 1, n)
//   3. output lengths:  integers(int(out_len * ratio), out_len + 1, n)
//   4. offsets:         integers(0, vocab, n)
// Prompt i's ids are prefix + [(offset_i + i + k) % vocab for k < input_len_i],
// decoded to text, then re-encoded (up to 10 times) until the length survives
// the round trip: too long is truncated, too short is padded with
// integers(0, vocab, missing) from the same generator.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/numpy_random.h"
#include "tokenizer/tokenizer.h"

namespace mx::bench {

struct RandomDatasetOptions {
  int64_t input_len = 1024;
  int64_t output_len = 128;
  int64_t prefix_len = 0;
  double range_ratio = 1.0;
  int64_t num_prompts = 1000;
};

struct SampleRequest {
  std::string prompt;
  int64_t prompt_len = 0;         // tokens of the final prompt, re-encoded
  int64_t target_prompt_len = 0;  // prefix_len + the sampled input length
  int64_t output_len = 0;  // max_tokens for this request
};

// Throws mx::InvalidArgument for lengths or a ratio outside the definition.
std::vector<SampleRequest> sample_random_requests(const Tokenizer& tokenizer,
                                                  const RandomDatasetOptions& options,
                                                  Pcg64& rng);

// The seed tool's summary block ("Input/Output Length Statistics").
std::string length_statistics(const std::vector<SampleRequest>& requests);

}  // namespace mx::bench
