// What a request asks of the sampler and the stop logic. Every field is
// honored; validate() rejects values the sampler cannot honor.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mx {

struct SamplingParams {
  float temperature = 1.0f;       // 0 = greedy
  float top_p = 1.0f;             // (0, 1]
  int32_t top_k = 0;              // 0 or -1 = all tokens
  float min_p = 0.0f;             // [0, 1]
  float presence_penalty = 0.0f;  // [-2, 2], over generated tokens
  float frequency_penalty = 0.0f; // [-2, 2], over generated tokens
  float repetition_penalty = 1.0f;  // > 0, over prompt and generated tokens
  std::unordered_map<int32_t, float> logit_bias;  // token id -> added to its logit
  std::optional<uint64_t> seed;   // per-request RNG; unseeded requests draw a random seed
  int64_t max_tokens = 16;        // >= 1
  int64_t min_tokens = 0;         // stop tokens and stop strings are ignored before this many tokens
  std::vector<std::string> stop;  // stop strings, excluded from the output text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = -1;          // -1: none; k >= 0: chosen token's logprob + top k
  bool skip_special_tokens = true;

  bool greedy() const { return temperature < 1e-5f; }
  // Throws mx::InvalidArgument naming the offending field.
  void validate(int32_t vocab_size) const;
};

// The most alternatives `logprobs` may ask for (OpenAI allows 20 for chat, 5 for completions).
inline constexpr int32_t kMaxLogprobs = 20;

}  // namespace mx
