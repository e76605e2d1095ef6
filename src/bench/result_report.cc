#include "bench/result_report.h"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

namespace mx::bench {

std::string percentile_word(double p) {
  if (p == std::floor(p)) return fmt::format("{}", int64_t(p));
  return fmt::format("{}", p);
}

std::string python_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

struct MetricInfo {
  const char* key;
  const char* name;
  const char* header;
  const Distribution BenchmarkMetrics::*field;
};

constexpr MetricInfo kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchmarkMetrics::ttft},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchmarkMetrics::tpot},
    {"itl", "ITL", "Inter-token Latency", &BenchmarkMetrics::itl},
    {"e2el", "E2EL", "End-to-end Latency", &BenchmarkMetrics::e2el},
};

bool selected(const std::vector<std::string>& names, const char* key) {
  for (const auto& n : names)
    if (n == key) return true;
  return false;
}

std::string centered(const std::string& text, char fill) {
  // Python's "{s:{c}^{n}}" with n=50: extra fill goes to the right.
  const int width = 50;
  const int pad = std::max(0, width - int(text.size()));
  return std::string(size_t(pad / 2), fill) + text + std::string(size_t(pad - pad / 2), fill);
}

std::string row(const std::string& label, const std::string& value) {
  return fmt::format("{:<40} {:<10}\n", label, value);
}

}  // namespace

std::string format_result_table(const BenchmarkMetrics& m, double duration_s,
                                const std::vector<std::string>& percentile_metrics) {
  std::string out = centered(" Serving Benchmark Result ", '=') + "\n";
  out += row("Successful requests:", std::to_string(m.completed));
  if (m.failed > 0) out += row("Failed requests:", std::to_string(m.failed));
  out += row("Benchmark duration (s):", fmt::format("{:.2f}", duration_s));
  out += row("Total input tokens:", std::to_string(m.total_input));
  out += row("Total generated tokens:", std::to_string(m.total_output));
  out += row("Request throughput (req/s):", fmt::format("{:.2f}", m.request_throughput));
  out += row("Output token throughput (tok/s):", fmt::format("{:.2f}", m.output_throughput));
  out += row("Total Token throughput (tok/s):", fmt::format("{:.2f}", m.total_token_throughput));
  out += row("Concurrency:", fmt::format("{:.2f}", m.concurrency));
  for (const auto& info : kMetrics) {
    if (!selected(percentile_metrics, info.key)) continue;
    const Distribution& d = m.*info.field;
    out += centered(info.header, '-') + "\n";
    out += row(fmt::format("Mean {} (ms):", info.name), fmt::format("{:.2f}", d.mean_ms));
    out += row(fmt::format("Median {} (ms):", info.name), fmt::format("{:.2f}", d.median_ms));
    for (const auto& [p, v] : d.percentiles_ms)
      out += row(fmt::format("P{} {} (ms):", percentile_word(p), info.name), fmt::format("{:.2f}", v));
  }
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json result_json(const ResultContext& ctx, const RunResult& run,
                           const std::vector<int64_t>& output_tokens, const BenchmarkMetrics& m) {
  using nlohmann::json;
  json j;
  j["date"] = ctx.date;
  j["backend"] = ctx.backend;
  j["model_id"] = ctx.model_id;
  j["tokenizer_id"] = ctx.tokenizer_id;
  j["num_prompts"] = ctx.num_prompts;
  j["request_rate"] = std::isinf(ctx.request_rate) ? json("inf") : json(ctx.request_rate);
  j["burstiness"] = ctx.burstiness;
  j["max_concurrency"] = ctx.max_concurrency > 0 ? json(ctx.max_concurrency) : json(nullptr);
  j["duration"] = run.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput:"] = nullptr;  // the seed tool's key, colon included; no --goodput here
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["concurrency"] = m.concurrency;
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(),
       itls = json::array(), texts = json::array(), errors = json::array(),
       start_times = json::array(), e2els = json::array(), successes = json::array();
  for (size_t i = 0; i < run.outcomes.size(); ++i) {
    const auto& r = run.outcomes[i];
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.success ? output_tokens[i] : 0);
    ttfts.push_back(r.ttft_s);
    itls.push_back(r.itl_s);
    texts.push_back(r.generated_text);
    errors.push_back(r.error);
    start_times.push_back(r.start_s);
    e2els.push_back(r.latency_s);
    successes.push_back(r.success);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["generated_texts"] = std::move(texts);
  j["errors"] = std::move(errors);
  // Beyond the seed's fields: what a report needs to rebuild every chart.
  j["start_times"] = std::move(start_times);
  j["e2els"] = std::move(e2els);
  j["successes"] = std::move(successes);
  j["percentile_metrics"] = ctx.percentile_metrics;
  j["metric_percentiles"] = ctx.percentiles;
  j["monotonic_origin_s"] = run.origin_monotonic_s;
  j["client_cpu_s"] = run.client_cpu_s;
  j["client_sse_events"] = run.sse_events;
  for (const auto& info : kMetrics) {
    if (!selected(ctx.percentile_metrics, info.key)) continue;
    const Distribution& d = m.*info.field;
    j[fmt::format("mean_{}_ms", info.key)] = d.mean_ms;
    j[fmt::format("median_{}_ms", info.key)] = d.median_ms;
    j[fmt::format("std_{}_ms", info.key)] = d.std_ms;
    for (const auto& [p, v] : d.percentiles_ms) j[fmt::format("p{}_{}_ms", percentile_word(p), info.key)] = v;
  }
  return j;
}

std::string default_result_filename(const ResultContext& ctx) {
  std::string base = ctx.model_id;
  if (const size_t slash = base.find_last_of('/'); slash != std::string::npos) base = base.substr(slash + 1);
  const std::string concurrency =
      ctx.max_concurrency > 0 ? fmt::format("-concurrency{}", ctx.max_concurrency) : "";
  return fmt::format("{}-{}qps{}-{}-{}.json", ctx.backend, python_float(ctx.request_rate), concurrency,
                     base, ctx.date);
}

std::string timestamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace mx::bench
