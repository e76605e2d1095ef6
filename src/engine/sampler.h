// Turns one sequence's logits into its next token: logit bias, penalties,
// then greedy or temperature/top-k/top-p/min-p sampling with the sequence's
// own RNG (so a seeded request samples the same tokens whatever runs beside
// it). Logprobs are those of the model's raw distribution, as vLLM reports.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace mx {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens, best first
};

struct SampledToken {
  int32_t token = 0;
  TokenLogprob logprob;  // filled when params.logprobs >= 0
};

// tokens: prompt followed by generated tokens; num_prompt_tokens splits them
// (presence/frequency penalties look at generated tokens only).
// vocab_limit: ids at or beyond it are never sampled (padded model vocabularies).
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                          std::mt19937_64& rng, int32_t vocab_limit);

// What sample_token does to the logits before choosing: logit_bias, then the
// repetition penalty (prompt and output), then presence/frequency penalties
// (output only). work holds the first vocab_limit logits. Exposed so a device
// sampler's processing can be checked against it (tests/gpu/sampler_parity.cc).
void process_logits(std::vector<float>& work, const SamplingParams& params, std::span<const int32_t> tokens,
                    int64_t num_prompt_tokens);

// Uniform double in [0, 1) from 53 random bits (identical on every platform).
double uniform01(std::mt19937_64& rng);

}  // namespace mx
