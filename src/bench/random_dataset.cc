#include "bench/random_dataset.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace mx::bench {
namespace {

constexpr int kMaxRoundTrips = 10;

void validate(const RandomDatasetOptions& o, int64_t vocab) {
  if (o.input_len < 1) fail_input("--random-input-len must be at least 1, got {}", o.input_len);
  if (o.output_len < 1) fail_input("--random-output-len must be at least 1, got {}", o.output_len);
  if (o.prefix_len < 0) fail_input("--random-prefix-len must be >= 0, got {}", o.prefix_len);
  if (!(o.range_ratio >= 0 && o.range_ratio <= 1))
    fail_input("--random-range-ratio must be in [0, 1], got {}", o.range_ratio);
  if (o.num_prompts < 1) fail_input("--num-prompts must be at least 1, got {}", o.num_prompts);
  if (vocab < 1) fail_input("the tokenizer reports an empty vocabulary");
}

// Lengths uniform in [int(len * ratio), len]; int() truncates like Python's.
std::vector<int64_t> sample_lengths(Pcg64& rng, int64_t len, double ratio, int64_t n) {
  const auto lower = int64_t(double(len) * ratio);
  return integers(rng, lower, len + 1, n);
}

// Decode, re-encode, fix the length, repeat until the token count is stable.
std::string round_trip_to_length(const Tokenizer& tok, std::vector<int32_t> ids, int64_t target,
                                 int64_t vocab, Pcg64& rng) {
  std::string prompt = tok.decode(ids, /*skip_special=*/false);
  for (int attempt = 0; attempt < kMaxRoundTrips; ++attempt) {
    ids = tok.encode(prompt, /*allow_special=*/true);
    const auto len = int64_t(ids.size());
    if (len < target) {
      for (int64_t extra : integers(rng, 0, vocab, target - len)) ids.push_back(int32_t(extra));
    } else if (len > target) {
      ids.resize(size_t(target));
    } else {
      break;
    }
    prompt = tok.decode(ids, /*skip_special=*/false);
  }
  return prompt;
}

}  // namespace

std::vector<SampleRequest> sample_random_requests(const Tokenizer& tokenizer,
                                                  const RandomDatasetOptions& o, Pcg64& rng) {
  const int64_t vocab = tokenizer.vocab_size();
  validate(o, vocab);
  std::vector<int64_t> prefix;
  if (o.prefix_len > 0) prefix = integers(rng, 0, vocab, o.prefix_len);
  const auto input_lens = sample_lengths(rng, o.input_len, o.range_ratio, o.num_prompts);
  const auto output_lens = sample_lengths(rng, o.output_len, o.range_ratio, o.num_prompts);
  const auto offsets = integers(rng, 0, vocab, o.num_prompts);

  std::vector<SampleRequest> requests;
  requests.reserve(size_t(o.num_prompts));
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    std::vector<int32_t> ids(prefix.begin(), prefix.end());
    for (int64_t k = 0; k < input_lens[i]; ++k) ids.push_back(int32_t((offsets[i] + i + k) % vocab));
    const int64_t target = o.prefix_len + input_lens[i];
    SampleRequest r;
    r.prompt = round_trip_to_length(tokenizer, std::move(ids), target, vocab, rng);
    r.prompt_len = int64_t(tokenizer.encode(r.prompt, /*allow_special=*/true).size());
    r.output_len = output_lens[i];
    r.target_prompt_len = target;
    requests.push_back(std::move(r));
  }
  return requests;
}

std::string length_statistics(const std::vector<SampleRequest>& requests) {
  if (requests.empty()) return {};
  int64_t in_min = INT64_MAX, in_max = 0, out_min = INT64_MAX, out_max = 0;
  double in_sum = 0, out_sum = 0, mismatch_sum = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    in_min = std::min(in_min, r.prompt_len);
    in_max = std::max(in_max, r.prompt_len);
    out_min = std::min(out_min, r.output_len);
    out_max = std::max(out_max, r.output_len);
    in_sum += double(r.prompt_len);
    out_sum += double(r.output_len);
    mismatch_sum += double(r.prompt_len - r.target_prompt_len);
  }
  const double n = double(requests.size());
  const std::string dashes(19, '-');
  const std::string header = dashes + "  Input/Output Length Statistics  " + dashes;
  std::string out = header + "\n";
  out += fmt::format(" input_lens : min={:<4d}  max={:<4d}  mean={:<7.2f}  avg_token_mismatch={:<5.2f} \n",
                     in_min, in_max, in_sum / n, mismatch_sum / n);
  out += fmt::format(" output_lens: min={:<4d}  max={:<4d}  mean={:<7.2f} \n", out_min, out_max, out_sum / n);
  out += std::string(header.size(), '-') + " \n";
  return out;
}

}  // namespace mx::bench
