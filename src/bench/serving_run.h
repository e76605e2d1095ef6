// Drives one serving benchmark: warm-up requests, then every sample request
// at its arrival time (all at t=0 for an infinite rate, otherwise gamma
// intervals with shape=burstiness, scale=1/(rate*burstiness)), never more than
// max_concurrency in flight. A request waiting for a slot is not yet "sent":
// its TTFT and E2EL start when it goes out, as in the seed's tool.
#pragma once
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "bench/http_stream_client.h"
#include "bench/metrics.h"
#include "bench/random_dataset.h"

namespace mx::bench {

enum class Backend { Vllm, OpenAi, OpenAiChat };

// "vllm" | "openai" | "openai-chat"; throws mx::InvalidArgument otherwise.
Backend parse_backend(const std::string& name);
ApiKind api_of(Backend b);

struct RunOptions {
  HttpEndpoint endpoint;
  Backend backend = Backend::Vllm;
  std::string model;  // the "model" field of each request
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no cap
  uint64_t seed = 0;
  bool ignore_eos = false;
  int64_t num_warmups = 1;
  bool show_progress = true;  // a progress bar on stderr
  std::vector<std::string> extra_headers;
};

struct RunResult {
  std::vector<RequestOutcome> outcomes;  // in sample order
  double duration_s = 0;
  double origin_monotonic_s = 0;  // benchmark start on CLOCK_MONOTONIC (start_s values count from it)
  double client_cpu_s = 0;   // user+sys CPU this process used during the main run
  uint64_t sse_events = 0;   // SSE events parsed during the main run
};

// The request body the seed's tool sends for this backend.
std::string request_body(const RunOptions& o, const SampleRequest& r);

// Arrival offsets (seconds from the start) for n requests.
std::vector<double> arrival_times(int64_t n, double rate, double burstiness, uint64_t seed);

RunResult run_serving_benchmark(const std::vector<SampleRequest>& requests, const RunOptions& o);

}  // namespace mx::bench
