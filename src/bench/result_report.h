// The seed tool's outputs: the "Serving Benchmark Result" block on the
// terminal and the --save-result JSON (its field names, plus every
// per-request sample so a report can be rebuilt from the file alone).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"
#include "bench/serving_run.h"

namespace mx::bench {

struct ResultContext {
  std::string backend;           // as given on the command line
  std::string model_id;
  std::string tokenizer_id;
  int64_t num_prompts = 0;
  double request_rate = 0;
  double burstiness = 1;
  int64_t max_concurrency = 0;  // 0: none
  std::vector<std::string> percentile_metrics;  // ttft, tpot, itl, e2el
  std::vector<double> percentiles;
  std::string date;  // %Y%m%d-%H%M%S, local time
};

// "99" for 99.0, "99.9" for 99.9 (Python's str(int(p)) if int(p) == p else str(p)).
std::string percentile_word(double p);

// Python's str(float): "inf", "10.0", "2.5".
std::string python_float(double v);

std::string format_result_table(const BenchmarkMetrics& m, double duration_s,
                                const std::vector<std::string>& percentile_metrics);

// output_tokens: the counts the metrics used (usage, or the tokenizer fallback).
nlohmann::json result_json(const ResultContext& ctx, const RunResult& run,
                           const std::vector<int64_t>& output_tokens, const BenchmarkMetrics& m);

// The seed tool's default name: {backend}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json
std::string default_result_filename(const ResultContext& ctx);

// Current local time as %Y%m%d-%H%M%S.
std::string timestamp_now();

}  // namespace mx::bench
