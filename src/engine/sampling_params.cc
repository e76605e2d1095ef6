#include "engine/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace mx {

namespace {
void check_finite(float v, const char* name) {
  if (!std::isfinite(v)) fail_input("'{}' must be a finite number", name);
}
}  // namespace

void SamplingParams::validate(int32_t vocab_size) const {
  check_finite(temperature, "temperature");
  check_finite(top_p, "top_p");
  check_finite(min_p, "min_p");
  check_finite(presence_penalty, "presence_penalty");
  check_finite(frequency_penalty, "frequency_penalty");
  check_finite(repetition_penalty, "repetition_penalty");
  if (temperature < 0) fail_input("'temperature' must be >= 0, got {}", temperature);
  if (!(top_p > 0 && top_p <= 1)) fail_input("'top_p' must be in (0, 1], got {}", top_p);
  if (top_k < -1) fail_input("'top_k' must be -1, 0 (disabled) or positive, got {}", top_k);
  if (min_p < 0 || min_p > 1) fail_input("'min_p' must be in [0, 1], got {}", min_p);
  if (presence_penalty < -2 || presence_penalty > 2)
    fail_input("'presence_penalty' must be in [-2, 2], got {}", presence_penalty);
  if (frequency_penalty < -2 || frequency_penalty > 2)
    fail_input("'frequency_penalty' must be in [-2, 2], got {}", frequency_penalty);
  if (repetition_penalty <= 0) fail_input("'repetition_penalty' must be > 0, got {}", repetition_penalty);
  if (max_tokens < 1) fail_input("'max_tokens' must be at least 1, got {}", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens)
    fail_input("'min_tokens' must be between 0 and max_tokens ({}), got {}", max_tokens, min_tokens);
  if (logprobs < -1 || logprobs > kMaxLogprobs)
    fail_input("'logprobs' must be between 0 and {}, got {}", kMaxLogprobs, logprobs);
  for (const auto& s : stop)
    if (s.empty()) fail_input("'stop' strings must not be empty");
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size) fail_input("'stop_token_ids' holds {} outside the vocabulary [0, {})", id, vocab_size);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) fail_input("'logit_bias' names token {} outside the vocabulary [0, {})", id, vocab_size);
    if (!std::isfinite(bias) || bias < -100 || bias > 100)
      fail_input("'logit_bias' values must be in [-100, 100], got {} for token {}", bias, id);
  }
}

}  // namespace mx
