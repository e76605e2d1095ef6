#include "bench/result_report.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/html_report.h"
#include "core/error.h"

namespace mx::bench {

TEST(ResultReport, PythonStyleNumbers) {
  EXPECT_EQ(python_float(INFINITY), "inf");
  EXPECT_EQ(python_float(10.0), "10.0");
  EXPECT_EQ(python_float(2.5), "2.5");
  EXPECT_EQ(percentile_word(99), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
}

TEST(ResultReport, DefaultFileNameFollowsTheSeedTool) {
  ResultContext ctx;
  ctx.backend = "vllm";
  ctx.model_id = "/models/Kimi-K2.5-MXFP4";
  ctx.request_rate = INFINITY;
  ctx.max_concurrency = 40;
  ctx.date = "20261130-120000";
  EXPECT_EQ(default_result_filename(ctx), "vllm-infqps-concurrency40-Kimi-K2.5-MXFP4-20261130-120000.json");
  ctx.max_concurrency = 0;
  ctx.request_rate = 4;
  EXPECT_EQ(default_result_filename(ctx), "vllm-4.0qps-Kimi-K2.5-MXFP4-20261130-120000.json");
}

TEST(ResultReport, TableLayoutMatchesTheSeedTool) {
  BenchmarkMetrics m;
  m.completed = 10;
  m.ttft.mean_ms = 421.239;
  m.ttft.median_ms = 380.5;
  m.ttft.percentiles_ms = {{99, 607.2}, {99.9, 610}};
  const std::string table = format_result_table(m, 12.345, {"ttft"});
  EXPECT_EQ(table.substr(0, 51), "============ Serving Benchmark Result ============\n");
  EXPECT_NE(table.find("Successful requests:                     10        \n"), std::string::npos);
  EXPECT_NE(table.find("Benchmark duration (s):                  12.35     \n"), std::string::npos);
  EXPECT_NE(table.find("---------------Time to First Token----------------\n"), std::string::npos);
  EXPECT_NE(table.find("Mean TTFT (ms):                          421.24    \n"), std::string::npos);
  EXPECT_NE(table.find("P99.9 TTFT (ms):"), std::string::npos);
  EXPECT_EQ(table.find("TPOT"), std::string::npos);  // not selected
  EXPECT_EQ(table.find("Failed requests"), std::string::npos);
  EXPECT_EQ(table.substr(table.size() - 51), std::string(50, '=') + "\n");
}

TEST(ResultReport, JsonCarriesSeedKeysAndSamplesAndRebuildsTheHtml) {
  RunResult run;
  run.duration_s = 2;
  RequestOutcome r;
  r.success = true;
  r.prompt_len = 5;
  r.ttft_s = 0.1;
  r.latency_s = 0.4;
  r.itl_s = {0.1, 0.2};
  r.generated_text = "abc";
  run.outcomes = {r};
  const std::vector<int64_t> tokens = {3};
  const std::vector<double> ps = {99};
  const BenchmarkMetrics m = compute_metrics(run.outcomes, tokens, run.duration_s, ps);
  ResultContext ctx;
  ctx.backend = "vllm";
  ctx.model_id = "m";
  ctx.request_rate = INFINITY;
  ctx.percentile_metrics = {"ttft", "tpot"};
  ctx.percentiles = ps;
  const auto j = result_json(ctx, run, tokens, m);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_TRUE(j["max_concurrency"].is_null());
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["output_lens"], nlohmann::json::array({3}));
  EXPECT_EQ(j["itls"][0].size(), 2u);
  EXPECT_NEAR(j["mean_tpot_ms"].get<double>(), 150, 1e-9);
  EXPECT_TRUE(j.contains("p99_ttft_ms"));
  EXPECT_FALSE(j.contains("mean_itl_ms"));  // not selected, as in the seed tool
  const std::string html = render_html_report(j);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  nlohmann::json broken = j;
  broken.erase("itls");
  EXPECT_THROW(render_html_report(broken), InvalidArgument);
}

}  // namespace mx::bench
