#include "bench/metrics.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx::bench {

// Expected values: numpy.percentile(x, p) with numpy 2.4.
TEST(Metrics, PercentileMatchesNumpyLinear) {
  const std::vector<double> x = {5, 1, 4, 2, 3};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(x, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(x, 99), 4.96);   // np.percentile([1..5], 99)
  EXPECT_DOUBLE_EQ(percentile(x, 25), 2);
  EXPECT_DOUBLE_EQ(percentile(x, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile(x, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(x, 100), 5);
  const std::vector<double> two = {10, 20};
  EXPECT_DOUBLE_EQ(percentile(two, 99), 19.9);
  EXPECT_DOUBLE_EQ(percentile(two, 50), 15);  // even count: the mean of the middle two
}

TEST(Metrics, EmptyInputsGiveZeroLikeTheSeedTool) {
  EXPECT_EQ(percentile({}, 99), 0);
  EXPECT_EQ(mean({}), 0);
  EXPECT_EQ(stddev({}), 0);
}

TEST(Metrics, StddevIsPopulationStd) {
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(stddev(x), std::sqrt(1.25));
}

RequestOutcome ok(double ttft, double latency, std::vector<double> itl, int64_t prompt) {
  RequestOutcome r;
  r.success = true;
  r.ttft_s = ttft;
  r.latency_s = latency;
  r.itl_s = std::move(itl);
  r.prompt_len = prompt;
  return r;
}

TEST(Metrics, ComputesTheSeedDefinitions) {
  std::vector<RequestOutcome> rs;
  rs.push_back(ok(0.100, 0.500, {0.1, 0.1, 0.2}, 10));  // 5 tokens in 4 chunks
  rs.push_back(ok(0.200, 0.200, {}, 20));               // a single token: no TPOT
  RequestOutcome failed;
  failed.prompt_len = 1000;
  rs.push_back(failed);
  const std::vector<int64_t> tokens = {5, 1, 0};
  const std::vector<double> ps = {99, 50};
  const BenchmarkMetrics m = compute_metrics(rs, tokens, 2.0, ps);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);  // failed requests' prompts are not counted
  EXPECT_EQ(m.total_output, 6);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 18.0);
  EXPECT_DOUBLE_EQ(m.concurrency, 0.35);
  EXPECT_NEAR(m.ttft.mean_ms, 150, 1e-9);
  // TPOT only from the first request: (0.5 - 0.1) / (5 - 1) = 100 ms.
  EXPECT_NEAR(m.tpot.mean_ms, 100, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 100, 1e-9);
  // ITL pooled per chunk: {100, 100, 200}.
  EXPECT_NEAR(m.itl.mean_ms, 400.0 / 3, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  ASSERT_EQ(m.itl.percentiles_ms.size(), 2u);
  EXPECT_EQ(m.itl.percentiles_ms[0].first, 99);
  EXPECT_NEAR(m.itl.percentiles_ms[0].second, 198, 1e-9);
  EXPECT_NEAR(m.e2el.median_ms, 350, 1e-9);
}

TEST(Metrics, TpotNeedsMoreThanOneToken) {
  RequestOutcome r = ok(0.1, 0.3, {0.2}, 1);
  EXPECT_FALSE(tpot_s(r, 1).has_value());
  EXPECT_FALSE(tpot_s(r, 0).has_value());
  ASSERT_TRUE(tpot_s(r, 3).has_value());
  EXPECT_DOUBLE_EQ(*tpot_s(r, 3), 0.1);
}

TEST(Metrics, ParsesFlagLists) {
  EXPECT_EQ(parse_percentiles("25,50,99.9"), (std::vector<double>{25, 50, 99.9}));
  EXPECT_THROW(parse_percentiles("101"), InvalidArgument);
  EXPECT_THROW(parse_percentiles("9x"), InvalidArgument);
  EXPECT_EQ(parse_metric_names("ttft,tpot,itl,e2el").size(), 4u);
  EXPECT_THROW(parse_metric_names("ttft,latency"), InvalidArgument);
}

}  // namespace mx::bench
