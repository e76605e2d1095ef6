// Serving metrics in Prometheus' text format: latency histograms recorded by
// the engine loop, gauges and counters it updates, rendered by /metrics.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mx {

class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> upper_bounds);
  void observe(double value);
  void render(std::string& out) const;
  int64_t count() const;

 private:
  std::string name_, help_;
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<int64_t> bucket_counts_;  // per bound, not cumulative; +Inf is count_
  double sum_ = 0;
  int64_t count_ = 0;
};

struct EngineMetrics {
  EngineMetrics();
  Histogram time_to_first_token;    // seconds from arrival to the first generated token
  Histogram inter_token_latency;    // seconds between consecutive tokens of a sequence
  Histogram time_per_output_token;  // (e2e - ttft) / (tokens - 1), per finished sequence
  Histogram e2e_latency;            // seconds from arrival to finish
  Histogram queue_time;             // seconds from arrival to first scheduled
  std::atomic<int64_t> num_running{0}, num_waiting{0};
  std::atomic<int64_t> kv_blocks_used{0}, kv_blocks_total{0};
  std::atomic<int64_t> prompt_tokens{0}, generation_tokens{0};
  std::atomic<int64_t> prefix_queried_tokens{0}, prefix_hit_tokens{0};
  std::atomic<int64_t> preemptions{0};
  std::atomic<int64_t> requests_finished{0}, requests_rejected{0};

  std::string render_prometheus() const;
};

}  // namespace mx
