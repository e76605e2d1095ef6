// `mxserve bench`: the serving benchmark client (docs/bench.md).
//   bench serve        the seed's benchmark_serving, same flags and definitions
//   bench report       rebuild the HTML report from a saved result JSON
//   bench dataset      print the random dataset's prompts as JSON lines
//   bench fake-server  (hidden) a fast scripted OpenAI streaming server, for
//                      measuring the client itself
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/fake_server.h"
#include "bench/html_report.h"
#include "bench/random_dataset.h"
#include "bench/result_report.h"
#include "bench/serving_run.h"
#include "cli/command.h"
#include "core/error.h"
#include "model/default_model.h"
#include "server/model_files.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;
using namespace mx::bench;

struct ServeFlags {
  std::string model, served_model_name, tokenizer;
  std::string backend = "vllm";
  std::string base_url, host = "127.0.0.1", endpoint;
  int port = 8000;
  bool trust_remote_code = false;
  std::string dataset_name = "random";
  RandomDatasetOptions dataset;
  int64_t max_concurrency = 0;
  std::string request_rate = "inf";
  double burstiness = 1.0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string percentile_metrics = "ttft,tpot,itl";
  std::string metric_percentiles = "99";
  int64_t num_warmups = 1;
  bool save_result = false, disable_tqdm = false;
  std::string result_dir, result_filename, report_html;
};

double parse_rate(const std::string& text) {
  if (text == "inf" || text == "Infinity" || text == "infinity") return INFINITY;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v > 0)) fail_input("--request-rate '{}' is not a positive number or inf", text);
  return v;
}

// The tokenizer comes from --tokenizer, else from --model when that is a path
// (a model directory or .gguf, read as `mxserve serve` reads it), else from the
// packaged default model when --model is its name (what `mxserve serve` with
// no --model serves).
std::unique_ptr<Tokenizer> tokenizer_for(const ServeFlags& f, std::string* tokenizer_id) {
  std::string source = f.tokenizer.empty() ? f.model : f.tokenizer;
  if (!fs::exists(source)) {
    if (!f.tokenizer.empty()) fail_input("--tokenizer '{}' does not exist", f.tokenizer);
    if (f.model != kDefaultModelName)
      fail_input("no tokenizer: --model '{}' is not a path; pass --tokenizer DIR_OR_FILE "
                 "(the model directory or .gguf the server runs)", f.model);
    source = resolve_default_model().string();
  }
  *tokenizer_id = source;
  return load_model_tokenizer(source);
}

void add_dataset_flags(CLI::App* cmd, ServeFlags& f) {
  cmd->add_option("--model", f.model, "Model name sent in requests; also where the tokenizer is read "
                                      "from when it is a directory or .gguf file")->required();
  cmd->add_option("--tokenizer", f.tokenizer, "Model directory, .gguf or tokenizer file to tokenize with "
                                              "(default: --model; the packaged default model for its name)");
  cmd->add_flag("--trust-remote-code", f.trust_remote_code, "Accepted for compatibility; has no effect");
  cmd->add_option("--dataset-name", f.dataset_name, "Dataset (only 'random')")
      ->check(CLI::IsMember({"random"}));
  cmd->add_option("--random-input-len", f.dataset.input_len, "Input tokens per request");
  cmd->add_option("--random-output-len", f.dataset.output_len, "Output tokens per request (max_tokens)");
  cmd->add_option("--random-range-ratio", f.dataset.range_ratio,
                  "Lengths are uniform in [int(L*ratio), L]");
  cmd->add_option("--random-prefix-len", f.dataset.prefix_len, "Shared random prefix tokens");
  cmd->add_option("--num-prompts", f.dataset.num_prompts, "Number of requests");
  cmd->add_option("--seed", f.seed, "numpy default_rng seed of the dataset (and of the arrivals)");
}

void run_serve(const ServeFlags& f) {
  const Backend backend = parse_backend(f.backend);
  const auto metric_names = parse_metric_names(f.percentile_metrics);
  const auto percentiles = parse_percentiles(f.metric_percentiles);
  RunOptions o;
  o.backend = backend;
  const std::string endpoint =
      !f.endpoint.empty() ? f.endpoint
                          : (backend == Backend::OpenAiChat ? "/v1/chat/completions" : "/v1/completions");
  o.endpoint = parse_http_url(!f.base_url.empty() ? f.base_url + endpoint
                                                  : fmt::format("http://{}:{}{}", f.host, f.port, endpoint));
  o.model = f.served_model_name.empty() ? f.model : f.served_model_name;
  o.request_rate = parse_rate(f.request_rate);
  o.burstiness = f.burstiness;
  if (f.max_concurrency < 0) fail_input("--max-concurrency must be positive, got {}", f.max_concurrency);
  o.max_concurrency = f.max_concurrency;
  o.seed = f.seed;
  o.ignore_eos = f.ignore_eos;
  if (f.num_warmups < 0) fail_input("--num-warmups must be >= 0, got {}", f.num_warmups);
  o.num_warmups = f.num_warmups;
  o.show_progress = !f.disable_tqdm;
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key)
    o.extra_headers.push_back(fmt::format("Authorization: Bearer {}", key));

  std::string tokenizer_id;
  const auto tokenizer = tokenizer_for(f, &tokenizer_id);
  Pcg64 rng(f.seed);
  const auto requests = sample_random_requests(*tokenizer, f.dataset, rng);
  std::fputs(length_statistics(requests).c_str(), stdout);
  std::fputs("\n", stdout);

  const RunResult run = run_serving_benchmark(requests, o);
  std::vector<int64_t> output_tokens;
  for (const auto& r : run.outcomes) {
    if (!r.success) output_tokens.push_back(0);
    else if (r.output_tokens) output_tokens.push_back(*r.output_tokens);
    // No usage in the stream: count the text's tokens, as the seed's tool does.
    else output_tokens.push_back(int64_t(tokenizer->encode(r.generated_text, false).size()));
  }
  const BenchmarkMetrics m = compute_metrics(run.outcomes, output_tokens, run.duration_s, percentiles);
  std::fputs(format_result_table(m, run.duration_s, metric_names).c_str(), stdout);
  std::fflush(stdout);
  for (const auto& r : run.outcomes)
    if (!r.success) {
      std::fprintf(stderr, "first failed request: %s\n", r.error.c_str());
      break;
    }

  ResultContext ctx{f.backend, f.model, tokenizer_id, f.dataset.num_prompts, o.request_rate,
                    o.burstiness, o.max_concurrency, metric_names, percentiles, timestamp_now()};
  const auto json = result_json(ctx, run, output_tokens, m);
  if (f.save_result) {
    fs::path file = f.result_filename.empty() ? fs::path(default_result_filename(ctx)) : fs::path(f.result_filename);
    if (!f.result_dir.empty()) {
      fs::create_directories(f.result_dir);
      file = fs::path(f.result_dir) / file;
    }
    std::ofstream(file) << json.dump() << "\n";
    fs::path html = f.report_html.empty() ? fs::path(file).replace_extension(".html") : fs::path(f.report_html);
    std::ofstream(html) << render_html_report(json);
    std::printf("Saved %s and %s\n", file.c_str(), html.c_str());
  } else if (!f.report_html.empty()) {
    std::ofstream(f.report_html) << render_html_report(json);
    std::printf("Saved %s\n", f.report_html.c_str());
  }
  if (m.completed == 0) fail("all {} requests failed", run.outcomes.size());
}

void setup_serve(CLI::App* bench) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = bench->add_subcommand("serve", "Benchmark an OpenAI-compatible server (the seed's benchmark_serving)");
  // A repeated flag takes its last value, as argparse (the seed's tool) does.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  add_dataset_flags(cmd, *f);
  cmd->add_option("--backend", f->backend, "vllm | openai (completions) | openai-chat")
      ->check(CLI::IsMember({"vllm", "openai", "openai-chat"}));
  cmd->add_option("--base-url", f->base_url, "Server URL, e.g. http://127.0.0.1:8000 (overrides --host/--port)");
  cmd->add_option("--host", f->host, "Server host when no --base-url");
  cmd->add_option("--port", f->port, "Server port when no --base-url");
  cmd->add_option("--endpoint", f->endpoint,
                  "API path (default /v1/completions; /v1/chat/completions for openai-chat)");
  cmd->add_option("--served-model-name", f->served_model_name, "Model name in requests (default: --model)");
  cmd->add_option("--max-concurrency", f->max_concurrency, "Most requests in flight at once (default: no cap)");
  cmd->add_option("--request-rate", f->request_rate, "Requests per second, or inf: all at once");
  cmd->add_option("--burstiness", f->burstiness, "Gamma shape of the arrival intervals (1 = Poisson)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Send ignore_eos: true");
  cmd->add_option("--percentile-metrics", f->percentile_metrics, "Metrics to report: ttft,tpot,itl,e2el");
  cmd->add_option("--metric-percentiles", f->metric_percentiles, "Percentiles to report, e.g. 25,50,99");
  cmd->add_option("--num-warmups", f->num_warmups, "Warm-up requests before the timed run");
  cmd->add_flag("--save-result", f->save_result, "Write the result JSON (and an HTML report beside it)");
  cmd->add_option("--result-dir", f->result_dir, "Directory for the result files");
  cmd->add_option("--result-filename", f->result_filename, "Result JSON file name");
  cmd->add_option("--report-html", f->report_html, "HTML report path (default: the JSON's name, .html)");
  cmd->add_flag("--disable-tqdm", f->disable_tqdm, "No progress bar");
  cmd->callback([f] { run_serve(*f); });
}

void setup_report(CLI::App* bench) {
  auto result = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* cmd = bench->add_subcommand("report", "Rebuild the HTML report from a saved result JSON");
  cmd->add_option("--result", *result, "Result JSON from `bench serve --save-result`")->required();
  cmd->add_option("--out", *out, "HTML file to write")->required();
  cmd->callback([result, out] {
    std::ifstream in(*result);
    if (!in) fail_input("cannot read '{}'", *result);
    const auto json = nlohmann::json::parse(in, nullptr, false);
    if (json.is_discarded()) fail_input("'{}' is not valid JSON", *result);
    std::ofstream(*out) << render_html_report(json);
    std::printf("Saved %s\n", out->c_str());
  });
}

void setup_dataset(CLI::App* bench) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = bench->add_subcommand("dataset", "Print the random dataset as JSON lines (prompt, lengths)");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  add_dataset_flags(cmd, *f);
  cmd->callback([f] {
    std::string tokenizer_id;
    const auto tokenizer = tokenizer_for(*f, &tokenizer_id);
    Pcg64 rng(f->seed);
    for (const auto& r : sample_random_requests(*tokenizer, f->dataset, rng)) {
      nlohmann::json line = {{"prompt", r.prompt},
                             {"prompt_len", r.prompt_len},
                             {"target_prompt_len", r.target_prompt_len},
                             {"output_len", r.output_len}};
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  });
}

void setup_fake_server(CLI::App* bench) {
  auto o = std::make_shared<FakeServerOptions>();
  auto* cmd = bench->add_subcommand("fake-server", "");  // hidden: empty description
  cmd->group("");
  cmd->add_option("--port", o->port, "Port (0: pick one and print it)");
  cmd->add_option("--ttft-ms", o->ttft_ms, "Delay before the first chunk");
  cmd->add_option("--itl-ms", o->itl_ms, "Delay between chunks");
  cmd->add_option("--tokens-per-chunk", o->tokens_per_chunk, "Tokens each chunk stands for");
  cmd->callback([o] { run_fake_server(*o); });
}

Register reg([](CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: `bench serve` measures a serving endpoint");
  bench->require_subcommand(1);
  setup_serve(bench);
  setup_report(bench);
  setup_dataset(bench);
  setup_fake_server(bench);
});

}  // namespace
}  // namespace mx::cli
