#include "bench/serving_run.h"

#include <sys/resource.h>

#include <cmath>
#include <deque>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/result_report.h"
#include "core/error.h"

namespace mx::bench {

Backend parse_backend(const std::string& name) {
  if (name == "vllm") return Backend::Vllm;
  if (name == "openai") return Backend::OpenAi;
  if (name == "openai-chat") return Backend::OpenAiChat;
  fail_input("--backend '{}' is not supported (vllm, openai, openai-chat)", name);
}

ApiKind api_of(Backend b) {
  return b == Backend::OpenAiChat ? ApiKind::ChatCompletions : ApiKind::Completions;
}

std::string request_body(const RunOptions& o, const SampleRequest& r) {
  nlohmann::json body;
  body["model"] = o.model;
  if (o.backend == Backend::OpenAiChat) {
    body["messages"] = nlohmann::json::array(
        {{{"role", "user"}, {"content", nlohmann::json::array({{{"type", "text"}, {"text", r.prompt}}})}}});
    body["max_completion_tokens"] = r.output_len;
  } else {
    body["prompt"] = r.prompt;
    body["max_tokens"] = r.output_len;
  }
  body["temperature"] = 0.0;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  // Prompts are arbitrary token sequences: replace invalid UTF-8 rather than throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<double> arrival_times(int64_t n, double rate, double burstiness, uint64_t seed) {
  if (!(burstiness > 0)) fail_input("--burstiness must be positive, got {}", burstiness);
  if (!(rate > 0)) fail_input("--request-rate must be positive (or inf), got {}", rate);
  std::vector<double> times(size_t(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate)) return times;
  // Seeded, but not numpy's gamma sampler: the intervals follow the same
  // distribution as the seed tool's, not the same draws.
  std::mt19937_64 gen(seed);
  std::gamma_distribution<double> gamma(burstiness, 1.0 / (rate * burstiness));
  double t = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    times[i] = t;
    t += gamma(gen);
  }
  return times;
}

namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// tqdm-like: " 37/160 [00:12<00:40,  3.10 req/s]" redrawn in place on stderr.
class ProgressBar {
 public:
  ProgressBar(bool enabled, size_t total, const char* label)
      : enabled_(enabled), total_(total), label_(label), start_(monotonic_seconds()) {
    draw(true);
  }
  void advance() {
    ++done_;
    draw(done_ == total_);
  }
  void close() {
    if (enabled_) std::fputc('\n', stderr);
  }

 private:
  void draw(bool force) {
    if (!enabled_) return;
    const double now = monotonic_seconds();
    if (!force && now - last_draw_ < 0.1) return;
    last_draw_ = now;
    const double elapsed = now - start_;
    const double rate = elapsed > 0 ? double(done_) / elapsed : 0;
    const double left = rate > 0 ? double(total_ - done_) / rate : 0;
    constexpr int kWidth = 30;
    const int filled = total_ ? int(kWidth * done_ / total_) : kWidth;
    std::fprintf(stderr, "\r%s%3d%%|%s%s| %zu/%zu [%s<%s, %.2f req/s]", label_,
                 total_ ? int(100 * done_ / total_) : 100, std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), done_, total_, clock(elapsed).c_str(),
                 clock(left).c_str(), rate);
    std::fflush(stderr);
  }
  static std::string clock(double s) {
    const auto total = int64_t(s);
    return fmt::format("{:02d}:{:02d}", total / 60, total % 60);
  }
  bool enabled_;
  size_t total_;
  size_t done_ = 0;
  const char* label_;
  double start_;
  double last_draw_ = -1;
};

// Sends `bodies[i]` when arrivals[i] has passed and a slot is free; returns
// the outcomes in order.
std::vector<RequestOutcome> drive(const RunOptions& o, const std::vector<std::string>& bodies,
                                  const std::vector<int64_t>& prompt_lens,
                                  const std::vector<double>& arrivals, ProgressBar& bar,
                                  double origin, uint64_t* events) {
  std::vector<RequestOutcome> outcomes(bodies.size());
  size_t finished = 0;
  HttpStreamClient client(o.endpoint, o.extra_headers, [&](size_t i, RequestOutcome r) {
    outcomes[i] = std::move(r);
    ++finished;
    bar.advance();
  });
  const size_t cap = o.max_concurrency > 0 ? size_t(o.max_concurrency) : SIZE_MAX;
  const ApiKind api = api_of(o.backend);
  size_t next_arrival = 0;
  std::deque<size_t> waiting;  // arrived, waiting for a concurrency slot
  while (finished < bodies.size()) {
    const double now = monotonic_seconds() - origin;
    while (next_arrival < bodies.size() && arrivals[next_arrival] <= now) waiting.push_back(next_arrival++);
    while (!waiting.empty() && client.in_flight() < cap) {
      const size_t i = waiting.front();
      waiting.pop_front();
      client.start(i, bodies[i], api, prompt_lens[i], origin);
    }
    double timeout = 0.05;
    if (next_arrival < bodies.size()) timeout = std::min(timeout, arrivals[next_arrival] - now);
    if (client.in_flight() > 0 || timeout > 0) client.poll(std::max(timeout, 0.0));
  }
  *events = client.events_received();
  return outcomes;
}

}  // namespace

RunResult run_serving_benchmark(const std::vector<SampleRequest>& requests, const RunOptions& o) {
  if (requests.empty()) fail_input("no requests to send");
  raise_open_file_limit();
  uint64_t events = 0;
  if (o.num_warmups > 0) {
    std::printf("Warming up with %lld requests...\n", (long long)o.num_warmups);
    std::fflush(stdout);
    const std::vector<std::string> bodies(size_t(o.num_warmups), request_body(o, requests[0]));
    const std::vector<int64_t> lens(bodies.size(), requests[0].prompt_len);
    ProgressBar bar(o.show_progress, bodies.size(), "warmup ");
    const auto warm = drive(o, bodies, lens, std::vector<double>(bodies.size(), 0.0), bar,
                            monotonic_seconds(), &events);
    bar.close();
    for (const auto& w : warm)
      if (!w.success) fail("warm-up request failed: {}", w.error);
    std::printf("Warmup completed.\n");
  }
  const char* distribution = o.burstiness == 1.0 ? "Poisson process" : "Gamma distribution";
  std::printf("Traffic request rate: %s\n", python_float(o.request_rate).c_str());
  std::printf("Burstiness factor: %s (%s)\n", python_float(o.burstiness).c_str(), distribution);
  std::printf("Maximum request concurrency: %s\n",
              o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "None");
  std::printf("Starting main benchmark run...\n");
  std::fflush(stdout);

  std::vector<std::string> bodies;
  std::vector<int64_t> lens;
  for (const auto& r : requests) {
    bodies.push_back(request_body(o, r));
    lens.push_back(r.prompt_len);
  }
  const auto arrivals = arrival_times(int64_t(requests.size()), o.request_rate, o.burstiness, o.seed);
  ProgressBar bar(o.show_progress, requests.size(), "");
  RunResult result;
  const double cpu0 = process_cpu_seconds();
  const double origin = monotonic_seconds();
  result.origin_monotonic_s = origin;
  result.outcomes = drive(o, bodies, lens, arrivals, bar, origin, &result.sse_events);
  result.duration_s = monotonic_seconds() - origin;
  result.client_cpu_s = process_cpu_seconds() - cpu0;
  bar.close();
  return result;
}

}  // namespace mx::bench
