// The seed's benchmark metrics (docs: /work/shared/docs/serving.md), computed
// from what the client observed for each request. Times are in seconds here
// and reported in milliseconds, as the seed's tool does.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mx::bench {

// What one request looked like from the client. Filled by the HTTP client.
struct RequestOutcome {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0;
  std::optional<int64_t> output_tokens;  // usage.completion_tokens, when sent
  double start_s = 0;                    // send time, from benchmark start
  double ttft_s = 0;                     // send -> first chunk with non-empty choices
  double latency_s = 0;                  // E2EL: send -> last chunk with non-empty choices
  std::vector<double> itl_s;             // gaps between consecutive choices chunks
  std::string generated_text;
};

// mean/median/std and the requested percentiles of one metric, in ms.
struct Distribution {
  double mean_ms = 0, median_ms = 0, std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  double concurrency = 0;  // sum of E2EL / duration: mean requests in flight
  Distribution ttft, tpot, itl, e2el;
};

// numpy.percentile(values, p) with the default 'linear' method; values need
// not be sorted. An empty input gives 0 (the seed's tool passes `xs or 0`).
double percentile(std::span<const double> values, double p);
// numpy.mean / numpy.std (ddof=0) / numpy.median with the same empty rule.
double mean(std::span<const double> values);
double stddev(std::span<const double> values);
Distribution distribution_ms(std::span<const double> seconds, std::span<const double> percentiles);

// TPOT of one request: (E2EL - TTFT) / (output_tokens - 1), defined only when
// it produced more than one token.
std::optional<double> tpot_s(const RequestOutcome& r, int64_t output_tokens);

// output_tokens[i] is the token count used for request i (usage when sent,
// otherwise the caller's fallback); failed requests count 0.
BenchmarkMetrics compute_metrics(std::span<const RequestOutcome> outcomes,
                                 std::span<const int64_t> output_tokens, double duration_s,
                                 std::span<const double> percentiles);

// "--metric-percentiles 25,50,99.9" -> {25, 50, 99.9}; each in [0, 100].
std::vector<double> parse_percentiles(const std::string& csv);
// "--percentile-metrics ttft,tpot" -> names, each one of ttft, tpot, itl, e2el.
std::vector<std::string> parse_metric_names(const std::string& csv);

}  // namespace mx::bench
