#include "bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"

namespace mx::bench {

double percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  // numpy 'linear': virtual index p/100 * (n-1), interpolated between
  // neighbours the way numpy's _lerp does it (from the nearer end when t >= 0.5).
  const double index = p / 100.0 * double(sorted.size() - 1);
  const double below = std::floor(index);
  const size_t lo = size_t(below);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double t = index - below;
  const double a = sorted[lo], b = sorted[hi];
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

double mean(std::span<const double> values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
}

double stddev(std::span<const double> values) {
  if (values.empty()) return 0;
  const double m = mean(values);
  double sum_sq = 0;
  for (double v : values) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / double(values.size()));
}

Distribution distribution_ms(std::span<const double> seconds, std::span<const double> percentiles) {
  Distribution d;
  d.mean_ms = mean(seconds) * 1000;
  d.median_ms = percentile(seconds, 50) * 1000;
  d.std_ms = stddev(seconds) * 1000;
  for (double p : percentiles) d.percentiles_ms.emplace_back(p, percentile(seconds, p) * 1000);
  return d;
}

std::optional<double> tpot_s(const RequestOutcome& r, int64_t output_tokens) {
  if (!r.success || output_tokens <= 1) return std::nullopt;
  return (r.latency_s - r.ttft_s) / double(output_tokens - 1);
}

BenchmarkMetrics compute_metrics(std::span<const RequestOutcome> outcomes,
                                 std::span<const int64_t> output_tokens, double duration_s,
                                 std::span<const double> percentiles) {
  MX_CHECK(outcomes.size() == output_tokens.size(), "{} outcomes but {} token counts",
           outcomes.size(), output_tokens.size());
  MX_CHECK(duration_s > 0, "benchmark duration must be positive, got {}", duration_s);
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const RequestOutcome& r = outcomes[i];
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_len;
    m.total_output += output_tokens[i];
    if (auto t = tpot_s(r, output_tokens[i])) tpots.push_back(*t);
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
  }
  m.request_throughput = double(m.completed) / duration_s;
  m.output_throughput = double(m.total_output) / duration_s;
  m.total_token_throughput = double(m.total_input + m.total_output) / duration_s;
  m.concurrency = std::accumulate(e2els.begin(), e2els.end(), 0.0) / duration_s;
  m.ttft = distribution_ms(ttfts, percentiles);
  m.tpot = distribution_ms(tpots, percentiles);
  m.itl = distribution_ms(itls, percentiles);
  m.e2el = distribution_ms(e2els, percentiles);
  return m;
}

namespace {
std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}
}  // namespace

std::vector<double> parse_percentiles(const std::string& csv) {
  std::vector<double> out;
  for (const auto& item : split_csv(csv)) {
    size_t used = 0;
    double p = 0;
    try {
      p = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || !(p >= 0 && p <= 100))
      fail_input("--metric-percentiles: '{}' is not a number in [0, 100]", item);
    out.push_back(p);
  }
  if (out.empty()) fail_input("--metric-percentiles: no percentile given in '{}'", csv);
  return out;
}

std::vector<std::string> parse_metric_names(const std::string& csv) {
  auto names = split_csv(csv);
  for (const auto& n : names)
    if (n != "ttft" && n != "tpot" && n != "itl" && n != "e2el")
      fail_input("--percentile-metrics: unknown metric '{}' (allowed: ttft, tpot, itl, e2el)", n);
  return names;
}

}  // namespace mx::bench
