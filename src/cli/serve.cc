// `mxserve serve`: the OpenAI-compatible server. Binds first (so /health can
// say 503 while the model loads), loads model + tokenizer + chat template,
// sizes the paged KV cache, then serves until SIGINT/SIGTERM, drains, exits.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <mutex>

#include "cli/model_flags.h"
#include "cli/command.h"
#include "cli/debug_faulty_model.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "model/default_model.h"
#include "model/parallel_causal_lm.h"
#include "ops/backend_registry.h"
#include "server/model_files.h"
#include "server/openai_server.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

struct ServeOptions : ModelFlags {
  std::string model, served_model_name, host = "127.0.0.1", api_key, kv_cache_dtype = "auto";
  int port = 8000, http_threads = 64, http_read_timeout_s = 60;
  bool trust_remote_code = false, no_prefix_caching = false, allow_long_max_model_len = false;
  bool enforce_eager = false;
  int64_t max_num_seqs = 256, max_num_batched_tokens = 0, max_model_len = 0, block_size = 0, num_kv_blocks = 0;
  int64_t max_queued_requests = 1024, max_request_body_mb = 32;
  int64_t debug_fail_forward_at_step = 0;  // testing only (cli/debug_faulty_model.h)
  double kv_cache_memory_gib = 0;     // 0: 1 GiB on cpu; on cuda, --gpu-memory-utilization decides
  std::string sampling_device;  // empty: the same as --device
  double gpu_memory_utilization = 0.9;
  double shutdown_timeout_s = 30.0;
  // Multi-node (docs/parallel.md).
  int nnodes = 1, node_rank = 0, master_port = 29500;
  std::string master_addr = "127.0.0.1";
  double node_timeout_s = 300;
};

// Set when a tensor-parallel rank failed: the server drains and exits 1 with it.
std::string g_parallel_failure;
std::mutex g_parallel_failure_mu;

void on_parallel_failure(const std::string& why) {
  {
    std::lock_guard lock(g_parallel_failure_mu);
    g_parallel_failure = why;
  }
  log::error("a tensor-parallel rank failed ({}): stopping the server", why);
  kill(getpid(), SIGTERM);  // the signal loop below drains and exits
}

KvCacheDtype parse_kv_dtype(const std::string& s) {
  if (s == "auto") return KvCacheDtype::Auto;
  if (s == "bf16" || s == "bfloat16") return KvCacheDtype::BF16;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::FP8;
  if (s == "f32" || s == "float32") return KvCacheDtype::F32;
  fail_input("--kv-cache-dtype '{}': expected auto, bf16, fp8 or f32", s);
}

// Tokens per KV block: --block-size, else 16 on the CPU and 64 on a GPU
// (bigger pages suit the GPU attention kernels).
int64_t block_size(const ServeOptions& o) { return o.block_size > 0 ? o.block_size : o.device == "cpu" ? 16 : 64; }

// On a GPU without --kv-cache-memory-gib: the share of the GPU's memory
// (--gpu-memory-utilization) that the weights, already loaded, left free.
double kv_budget_bytes(const ServeOptions& o, int device_index) {
  if (o.kv_cache_memory_gib > 0 || o.device == "cpu") return (o.kv_cache_memory_gib > 0 ? o.kv_cache_memory_gib : 1.0) * double(1ull << 30);
  const DeviceMemoryInfo m = device_memory_info(device_index);
  const double used = double(m.total_bytes - m.free_bytes);
  const double budget = o.gpu_memory_utilization * double(m.total_bytes) - used;
  log::info("GPU {}: {:.2f} GiB of {:.2f} GiB in use after loading; --gpu-memory-utilization {} leaves {:.2f} GiB for "
            "the KV cache", device_index, used / double(1ull << 30), double(m.total_bytes) / double(1ull << 30),
            o.gpu_memory_utilization, budget / double(1ull << 30));
  if (budget <= 0)
    fail_input("--gpu-memory-utilization {}: the GPU already has {:.2f} GiB of {:.2f} GiB in use, nothing is left for "
               "the KV cache (raise it, or give --kv-cache-memory-gib / --num-kv-blocks)", o.gpu_memory_utilization,
               used / double(1ull << 30), double(m.total_bytes) / double(1ull << 30));
  return budget;
}

int64_t kv_blocks(const ServeOptions& o, const CausalLM& model, KvCacheDtype dtype, int64_t block, int device_index) {
  if (o.num_kv_blocks > 0) return o.num_kv_blocks;
  const double bytes_per_block = double(model.kv_bytes_per_token(dtype)) * double(block);
  const double budget = kv_budget_bytes(o, device_index);
  const int64_t blocks = int64_t(budget / bytes_per_block);
  if (blocks < 1) fail_input("a KV budget of {:.3f} GiB holds no KV block of {} bytes", budget / double(1ull << 30), bytes_per_block);
  return blocks;
}

// Tokens per step: --max-num-batched-tokens, else 8192 on a GPU (vLLM's default
// for its server on large GPUs: prefill chunks big enough to keep the tensor
// cores busy; a full-width Kimi-K2.5 MoE layer ran at ~100 TFLOP/s on 2,048-token
// chunks, bench/gpu/2026-11-30-kimi) and 2048 on the CPU.
int64_t batched_tokens(const ServeOptions& o) {
  return o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens : o.device == "cpu" ? 2048 : 8192;
}

// A device backend uploads weights at their first use (cuda/backend/cuda_ops.h).
// One forward pass of a full step (--max-num-batched-tokens tokens, one
// sequence, over a temporary KV cache) before the KV cache is sized puts every
// weight on the device and runs the step's activations once, so the
// --gpu-memory-utilization budget is taken from what is really left and the
// first request does not pay for the uploads (vLLM's profile run does the same).
void warm_up_device(CausalLM& model, const ServeOptions& o, KvCacheDtype dtype, int64_t block) {
  if (o.device == "cpu") return;
  const int64_t context = model.config().max_position_embeddings;
  const int64_t tokens = std::max<int64_t>(1, context > 0 ? std::min(batched_tokens(o), context) : batched_tokens(o));
  const int64_t blocks = (tokens + block - 1) / block;
  const auto t0 = std::chrono::steady_clock::now();
  model.allocate_kv_cache(blocks, block, dtype);
  ForwardBatch batch;
  batch.token_ids.assign(size_t(tokens), 0);
  for (int64_t i = 0; i < tokens; ++i) batch.positions.push_back(int32_t(i));
  SequenceSlice seq;
  seq.num_new_tokens = tokens;
  for (int64_t b = 0; b < blocks; ++b) seq.block_table.push_back(int32_t(b));
  batch.seqs.push_back(std::move(seq));
  model.forward(batch);
  log::info("warm-up: one forward pass of {} tokens put the weights on the device ({:.1f} s)", tokens,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// --device and the sampler's device must exist in this binary; said before the
// port is bound, so a CPU-only build answers at once.
void check_devices(const ServeOptions& o) {
  const auto backends = available_ops_backends();
  if (std::find(backends.begin(), backends.end(), o.device) == backends.end())
    make_ops(o.device, {});  // throws the registry's message (names the available backends, hints at the build)
  const std::string sampler = o.sampling_device.empty() ? o.device : o.sampling_device;
  if (sampler != "cpu" && sampler != o.device)
    fail_input("--sampling-device {} needs --device {} (the logits live there)", sampler, sampler);
  const auto samplers = available_batch_samplers();
  if (std::find(samplers.begin(), samplers.end(), sampler) == samplers.end())
    make_batch_sampler(sampler, 0);  // throws the registry's message
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    fail_input("--gpu-memory-utilization must be in (0, 1], got {}", o.gpu_memory_utilization);
}

// --max-model-len, else the model's context, capped by what the KV cache holds (logged).
int64_t max_model_len(const ServeOptions& o, const ModelConfig& config, int64_t kv_tokens) {
  const int64_t model_len = config.max_position_embeddings > 0 ? config.max_position_embeddings : kv_tokens;
  if (o.max_model_len > 0) {
    if (o.max_model_len > model_len && !o.allow_long_max_model_len)
      fail_input("--max-model-len {} exceeds the model's context of {} tokens (--allow-long-max-model-len "
                 "serves it anyway, with positions the model was not trained on)", o.max_model_len, model_len);
    if (o.max_model_len > model_len)
      log::warn("--max-model-len {} exceeds the model's context of {} tokens: positions past it were never "
                "trained and outputs there may be garbage (allowed by --allow-long-max-model-len)",
                o.max_model_len, model_len);
    return o.max_model_len;
  }
  if (kv_tokens < model_len) {
    log::info("max model len: {} tokens (the KV cache's capacity; the model allows {}; raise "
              "--kv-cache-memory-gib or --num-kv-blocks for more)", kv_tokens, model_len);
    return kv_tokens;
  }
  return model_len;
}

// vLLM's -tp N (or -tpN, -tp=N); anything else left over is an error.
void read_extras(const std::vector<std::string>& extras, ServeOptions& o) {
  for (size_t i = 0; i < extras.size(); ++i) {
    std::string value;
    if (extras[i] == "-tp" && i + 1 < extras.size()) value = extras[++i];
    else if (extras[i].rfind("-tp", 0) == 0 && extras[i].size() > 3) value = extras[i].substr(extras[i][3] == '=' ? 4 : 3);
    else fail_input("serve: unknown argument '{}' (see mxserve serve --help)", extras[i]);
    try {
      size_t used = 0;
      o.tensor_parallel_size = std::stoi(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      fail_input("-tp: '{}' is not an integer", value);
    }
  }
}

int wait_for_signal(const sigset_t& signals) {
  int received = 0;
  sigwait(&signals, &received);
  return received;
}

// A second SIGINT/SIGTERM while draining: exit at once with the shell's
// 128 + signal code, skipping destructors (threads may still be writing).
[[noreturn]] void exit_now(int signal) {
  log::warn("signal {} while draining: exiting at once", signal);
  std::_Exit(128 + signal);
}

// Graceful shutdown: new requests get 503 while the engine finishes those in
// flight and their handlers write them out (httplib would cut streams short if
// its listening socket closed first). Past the timeout, the engine ends what
// is left with an error event, then the process exits 0: those clients saw
// the error, nothing is dropped silently.
void drain(OpenAIServer& server, Engine& engine, const sigset_t& signals, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  server.stop_accepting();
  bool timed_out = false;
  const timespec poll{0, 20'000'000};
  while (server.active_requests() > 0) {
    siginfo_t info;
    if (const int sig = sigtimedwait(&signals, &info, &poll); sig > 0) exit_now(sig);
    if (!timed_out && Clock::now() >= deadline) {
      log::warn("--shutdown-timeout {} s reached: ending the {} requests still in flight", timeout_s,
                server.active_requests());
      timed_out = true;
      engine.stop();  // their streams end with an error event, so their handlers return
    }
    if (timed_out && Clock::now() >= deadline + std::chrono::seconds(5)) {
      log::warn("{} connections still writing 5 s after the timeout: exiting without them", server.active_requests());
      std::_Exit(0);
    }
  }
  engine.stop();
  server.stop();
  log::info("drained in {:.2f} s; exiting", std::chrono::duration<double>(Clock::now() - start).count());
}

LoadOptions load_options(const ServeOptions& o) {
  LoadOptions load = o.load_options();
  load.on_parallel_failure = on_parallel_failure;
  return load;
}

// --nnodes K > 1 (docs/parallel.md, "Multi-node"): node 0 serves; the others
// run no HTTP server, only their ranks, following node 0's commands.
MultiNodeOptions multinode(const ServeOptions& o) {
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    fail_input("--node-rank {} --nnodes {}: the node rank must be in [0, --nnodes)", o.node_rank, o.nnodes);
  if (o.nnodes > 1 && o.tensor_parallel_size % o.nnodes != 0)
    fail_input("-tp {} over --nnodes {}: every node runs the same number of ranks, so -tp must be a multiple of "
               "--nnodes", o.tensor_parallel_size, o.nnodes);
  return MultiNodeOptions{o.nnodes, o.node_rank, o.master_addr, o.master_port, o.node_timeout_s};
}

void serve_worker_node(const ServeOptions& o) {
  check_devices(o);
  log::info("node {} of {}: ranks {}..{} of {}; node 0 at {}:{} serves the requests", o.node_rank, o.nnodes,
            o.node_rank * (o.tensor_parallel_size / o.nnodes), (o.node_rank + 1) * (o.tensor_parallel_size / o.nnodes) - 1,
            o.tensor_parallel_size, o.master_addr, o.master_port);
  run_worker_node(resolve_model_path(o.model), load_options(o), multinode(o));
}

void serve(const ServeOptions& o) {
  if (o.tensor_parallel_size < 1) fail_input("--tensor-parallel-size {}: must be at least 1", o.tensor_parallel_size);
  const MultiNodeOptions nodes = multinode(o);
  if (o.node_rank > 0) return serve_worker_node(o);
  const KvCacheDtype kv_dtype = parse_kv_dtype(o.kv_cache_dtype);
  check_devices(o);
  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ServerOptions server_options{o.host, o.port, o.api_key, size_t(o.max_request_body_mb) << 20, o.http_threads,
                               o.http_read_timeout_s};
  OpenAIServer server(server_options);
  const int port = server.start();
  log::info("listening on http://{}:{} (loading the model; /health answers 503 until ready)", o.host, port);

  const std::filesystem::path path = resolve_model_path(o.model);
  const LoadOptions load = load_options(o);
  auto model = o.nnodes > 1 ? load_multinode_causal_lm(path, load, nodes) : load_causal_lm(path, load);
  warm_up_device(*model, o, kv_dtype, block_size(o));
  if (o.debug_fail_forward_at_step > 0) {
    log::warn("--debug-fail-forward-at-step {}: forward step {} will fail (a testing flag)", o.debug_fail_forward_at_step,
              o.debug_fail_forward_at_step);
    model = std::make_unique<DebugFaultyModel>(std::move(model), o.debug_fail_forward_at_step);
  }
  auto tokenizer = load_model_tokenizer(path);
  auto chat_template = load_model_chat_template(path);
  if (!chat_template) log::warn("the model has no chat template: /v1/chat/completions will answer 400");

  EngineConfig ec;
  ec.max_num_seqs = o.max_num_seqs;
  ec.max_num_batched_tokens = batched_tokens(o);
  ec.block_size = block_size(o);
  ec.num_kv_blocks = kv_blocks(o, *model, kv_dtype, ec.block_size, load.device_index);
  ec.max_model_len = max_model_len(o, model->config(), ec.num_kv_blocks * ec.block_size);
  ec.kv_cache_dtype = kv_dtype;
  ec.enable_prefix_caching = !o.no_prefix_caching;
  ec.max_queued_requests = o.max_queued_requests;
  ec.sampler_device = o.sampling_device.empty() ? o.device : o.sampling_device;
  ec.device_index = load.device_index;
  ec.step_graphs = !o.enforce_eager;
  Engine engine(*model, *tokenizer, ec);
  engine.start();
  const std::string name = !o.served_model_name.empty() ? o.served_model_name : !o.model.empty() ? o.model : kDefaultModelName;
  server.attach(engine, ServedModel{*tokenizer, chat_template.get(), name, ec.max_model_len, engine.vocab_limit()});
  log::info("ready: {} as '{}'; {} KV blocks of {} tokens, max model len {}, sampling on {}", model->describe(), name,
            ec.num_kv_blocks, ec.block_size, ec.max_model_len, engine.sampler().name());

  const int received = wait_for_signal(signals);
  log::info("signal {}: refusing new requests (503); draining requests in flight (up to {} s; signal again to "
            "exit at once)", received, o.shutdown_timeout_s);
  drain(server, engine, signals, o.shutdown_timeout_s);
  std::lock_guard lock(g_parallel_failure_mu);
  if (!g_parallel_failure.empty()) fail("stopped because {}", g_parallel_failure);
}

Register reg([](CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("--model", o->model, "checkpoint directory or .gguf file (default: the packaged default model)");
  cmd->add_option("--served-model-name", o->served_model_name, "model id clients use (default: the --model value)");
  cmd->add_option("--host", o->host, "address to bind (default 127.0.0.1: this machine only)")->capture_default_str();
  cmd->add_option("--port,--server-port", o->port, "TCP port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on every route except /health");
  cmd->add_flag("--trust-remote-code", o->trust_remote_code,
                "accepted for compatibility; mxserve never runs code from a checkpoint");
  o->add_to(cmd, /*parallel=*/true);
  cmd->get_option("--tensor-parallel-size")->description(
      "devices (ranks) to shard the model over, one worker thread each (docs/parallel.md); -tp N works too");
  cmd->add_option("--nnodes", o->nnodes, "nodes (processes) sharing the -tp ranks, -tp/nnodes each "
                  "(docs/parallel.md)")->capture_default_str();
  cmd->add_option("--node-rank", o->node_rank, "this node's index: 0 serves HTTP and schedules; 1.. run their "
                  "ranks for node 0")->capture_default_str();
  cmd->add_option("--master-addr", o->master_addr, "node 0's address (the other nodes connect to it)")
      ->capture_default_str();
  cmd->add_option("--master-port", o->master_port, "node 0's TCP port for the other nodes (it listens on every "
                  "interface)")->capture_default_str();
  cmd->add_option("--node-timeout", o->node_timeout_s, "seconds the nodes wait for each other at startup")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->allow_extras();  // CLI11 2.1 refuses the two-letter short name -tp: it is read from the extras
  cmd->add_option("--kv-cache-dtype,--kv_cache_dtype", o->kv_cache_dtype, "KV cache storage: auto (= bf16), bf16, fp8 (e4m3, a scale per token) or f32 (reference)")->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "sequences running at once")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("--enforce-eager", o->enforce_eager,
                "with --device cuda: run every decode step op by op instead of replaying CUDA graphs recorded per "
                "batch size (1, 2, 4, then multiples of 8 up to --max-num-seqs) and block-table width");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                  "tokens computed per step (prefill chunks + decodes); default 8192 on a GPU, 2048 on the cpu")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len", o->max_model_len, "prompt + output tokens per sequence (default: the model's context, "
                  "capped by the KV cache)")->check(CLI::PositiveNumber);
  cmd->add_flag("--allow-long-max-model-len", o->allow_long_max_model_len,
                "accept a --max-model-len past the model's trained context (vLLM: VLLM_ALLOW_LONG_MAX_MODEL_LEN); "
                "outputs past it may be garbage");
  cmd->add_option("--block-size", o->block_size, "tokens per KV block (default: 16 on cpu, 64 on cuda)")->check(CLI::Range(1, 1024));
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks, "KV blocks to allocate (overrides --kv-cache-memory-gib)")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-memory-gib", o->kv_cache_memory_gib, "memory for the KV cache in GiB (default: 1 on cpu; "
                  "on cuda, what --gpu-memory-utilization leaves)")->check(CLI::PositiveNumber);
  cmd->add_option("--sampling-device", o->sampling_device, "where tokens are sampled: cpu, or the --device (default: the --device)");
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "with --device cuda: the share of the GPU's memory "
                  "the weights and the KV cache may use; the KV cache gets what the loaded weights leave of it")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching", o->no_prefix_caching, "do not reuse KV blocks of identical prompt prefixes");
  cmd->add_option("--max-queued-requests", o->max_queued_requests, "unfinished requests beyond --max-num-seqs before new ones get 503")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--max-request-body-mb", o->max_request_body_mb, "larger request bodies get 413")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "connections served at once (each stream holds one)")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--http-read-timeout", o->http_read_timeout_s, "seconds a client may stay silent while sending a "
                  "request before its connection is dropped")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout_s, "seconds to let requests in flight finish after "
                  "SIGTERM/SIGINT before ending them")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--debug-fail-forward-at-step", o->debug_fail_forward_at_step,
                  "TESTING ONLY: make the model's N-th forward step fail, to test how a worker error reaches the "
                  "requests of that step (docs/reliability.md)")->check(CLI::PositiveNumber);
  cmd->callback([o, cmd] {
    read_extras(cmd->remaining(), *o);
    serve(*o);
  });
});

}  // namespace
}  // namespace mx::cli
