#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "core/error.h"

namespace mx {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void apply_penalties(std::vector<float>& logits, const SamplingParams& p, std::span<const int32_t> tokens,
                     int64_t num_prompt_tokens) {
  const int32_t vocab = int32_t(logits.size());
  auto valid = [&](int32_t t) { return t >= 0 && t < vocab; };
  if (p.repetition_penalty != 1.0f) {  // HF/vLLM rule over prompt and output
    std::vector<bool> seen(size_t(vocab), false);
    for (int32_t t : tokens) {
      if (!valid(t) || seen[size_t(t)]) continue;
      seen[size_t(t)] = true;
      float& l = logits[size_t(t)];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {  // OpenAI rule over output
    std::unordered_map<int32_t, int32_t> counts;
    for (size_t i = size_t(num_prompt_tokens); i < tokens.size(); ++i) ++counts[tokens[i]];
    for (auto [t, c] : counts) {
      if (!valid(t)) continue;
      logits[size_t(t)] -= p.frequency_penalty * float(c) + p.presence_penalty;
    }
  }
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// Candidates after top-k, sorted by logit (descending) when any filter needs order.
std::vector<int32_t> candidates(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  const bool need_order = p.top_p < 1.0f || p.min_p > 0.0f || p.top_k > 0;
  if (!need_order) return ids;
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) {
    std::partial_sort(ids.begin(), ids.begin() + p.top_k, ids.end(), by_logit);
    ids.resize(size_t(p.top_k));
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  return ids;
}

int32_t sample_from(const std::vector<float>& logits, const SamplingParams& p, std::mt19937_64& rng) {
  std::vector<int32_t> ids = candidates(logits, p);
  float max_logit = kNegInf;
  for (int32_t id : ids) max_logit = std::max(max_logit, logits[size_t(id)]);
  if (max_logit == kNegInf) return ids.front();  // everything masked: nothing better to do
  std::vector<double> probs(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    probs[i] = std::exp(double(logits[size_t(ids[i])] - max_logit) / p.temperature);
    total += probs[i];
  }
  size_t keep = ids.size();
  if (p.min_p > 0.0f) {  // ids are sorted: the first has the highest probability
    const double floor = double(p.min_p) * probs[0];
    while (keep > 1 && probs[keep - 1] < floor) --keep;
  }
  if (p.top_p < 1.0f) {
    double kept_total = 0;
    for (size_t i = 0; i < keep; ++i) kept_total += probs[i];
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs[i];
      if (cum >= double(p.top_p) * kept_total) {
        keep = i + 1;
        break;
      }
    }
  }
  total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  double u = uniform01(rng) * total;
  for (size_t i = 0; i < keep; ++i) {
    if (u < probs[i]) return ids[i];
    u -= probs[i];
  }
  return ids[keep - 1];
}

TokenLogprob raw_logprobs(std::span<const float> logits, int32_t vocab_limit, int32_t token, int32_t top_n) {
  const size_t n = size_t(vocab_limit);
  float max_logit = kNegInf;
  for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(logits[i] - max_logit));
  const float lse = max_logit + float(std::log(sum));
  TokenLogprob out{token, logits[size_t(token)] - lse, {}};
  if (top_n > 0) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min(n, size_t(top_n));
    std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logits[size_t(ids[i])] - lse);
  }
  return out;
}

}  // namespace

void process_logits(std::vector<float>& work, const SamplingParams& params, std::span<const int32_t> tokens,
                    int64_t num_prompt_tokens) {
  const int32_t vocab_limit = int32_t(work.size());
  for (const auto& [id, bias] : params.logit_bias)
    if (id < vocab_limit) work[size_t(id)] += bias;
  apply_penalties(work, params, tokens, num_prompt_tokens);
}

double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                          std::mt19937_64& rng, int32_t vocab_limit) {
  MX_CHECK(vocab_limit > 0 && size_t(vocab_limit) <= logits.size(), "vocab limit {} vs {} logits", vocab_limit, logits.size());
  std::vector<float> work(logits.begin(), logits.begin() + vocab_limit);
  process_logits(work, params, tokens, num_prompt_tokens);
  SampledToken out;
  out.token = params.greedy() ? argmax(work) : sample_from(work, params, rng);
  if (params.logprobs >= 0) out.logprob = raw_logprobs(logits, vocab_limit, out.token, params.logprobs);
  return out;
}

}  // namespace mx
