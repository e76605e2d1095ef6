#include "engine/metrics.h"

#include <fmt/format.h>

namespace mx {

namespace {
const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                             0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLongBuckets = {0.01, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0};

void render_value(std::string& out, const char* type, const std::string& name, const std::string& help, double v) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, v);
}
}  // namespace

Histogram::Histogram(std::string name, std::string help, std::vector<double> upper_bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(upper_bounds)), bucket_counts_(bounds_.size(), 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++bucket_counts_[i];
      break;
    }
  }
  sum_ += value;
  ++count_;
}

int64_t Histogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

void Histogram::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name_, help_);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += bucket_counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name_, bounds_[i], cumulative);
  }
  out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name_, count_, sum_);
}

EngineMetrics::EngineMetrics()
    : time_to_first_token("mxserve:time_to_first_token_seconds", "Time from request arrival to its first generated token.", kLatencyBuckets),
      inter_token_latency("mxserve:inter_token_latency_seconds", "Time between consecutive generated tokens of a sequence.", kLatencyBuckets),
      time_per_output_token("mxserve:time_per_output_token_seconds", "Per finished sequence: (e2e - ttft) / (output tokens - 1).", kLatencyBuckets),
      e2e_latency("mxserve:e2e_request_latency_seconds", "Time from request arrival to its end.", kLongBuckets),
      queue_time("mxserve:request_queue_time_seconds", "Time from request arrival to its first scheduled step.", kLongBuckets) {}

std::string EngineMetrics::render_prometheus() const {
  std::string out;
  for (const Histogram* h : {&time_to_first_token, &inter_token_latency, &time_per_output_token, &e2e_latency, &queue_time})
    h->render(out);
  render_value(out, "gauge", "mxserve:num_requests_running", "Sequences in the running batch.", double(num_running));
  render_value(out, "gauge", "mxserve:num_requests_waiting", "Sequences waiting to be scheduled.", double(num_waiting));
  const double total = double(kv_blocks_total.load());
  render_value(out, "gauge", "mxserve:kv_cache_usage_perc", "Fraction of KV blocks held by sequences (0-1).",
               total > 0 ? double(kv_blocks_used) / total : 0.0);
  render_value(out, "counter", "mxserve:prompt_tokens_total", "Prompt tokens of admitted requests.", double(prompt_tokens));
  render_value(out, "counter", "mxserve:generation_tokens_total", "Generated tokens.", double(generation_tokens));
  render_value(out, "counter", "mxserve:prefix_cache_queries_total", "Tokens looked up in the prefix cache.", double(prefix_queried_tokens));
  render_value(out, "counter", "mxserve:prefix_cache_hits_total", "Tokens found in the prefix cache.", double(prefix_hit_tokens));
  const double queried = double(prefix_queried_tokens.load());
  render_value(out, "gauge", "mxserve:prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total.",
               queried > 0 ? double(prefix_hit_tokens) / queried : 0.0);
  render_value(out, "counter", "mxserve:num_preemptions_total", "Sequences preempted (to be recomputed).", double(preemptions));
  render_value(out, "counter", "mxserve:request_success_total", "Requests finished.", double(requests_finished));
  render_value(out, "counter", "mxserve:request_rejected_total", "Requests refused because the queue was full.", double(requests_rejected));
  return out;
}

}  // namespace mx
