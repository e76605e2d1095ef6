// The engine: owns the scheduler, block manager and per-sequence output state,
// runs model steps, samples, detokenizes and hands deltas to request streams.
// HTTP threads call submit()/abort(); one loop thread (start()) runs steps.
// Tests can instead drive it synchronously with step().
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/batch_sampler.h"
#include "engine/block_manager.h"
#include "engine/metrics.h"
#include "engine/output_text.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace mx {

struct EngineConfig {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_model_len = 4096;       // prompt + generated tokens of one sequence
  int64_t block_size = 16;
  int64_t num_kv_blocks = 0;          // must be set (the CLI derives it from a memory budget)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;
  bool enable_prefix_caching = true;
  int64_t max_queued_requests = 1024; // unfinished requests beyond max_num_seqs before refusing
  int32_t max_n = 16;                 // largest `n` a request may ask for
  // Where tokens are sampled (engine/batch_sampler.h): "cpu", or a device
  // registered by the binary ("cuda"), which then reads device-resident logits.
  std::string sampler_device = "cpu";
  int device_index = 0;
  // Record decode steps as CUDA graphs where the model's backend can
  // (model/step_graphs.h); --enforce-eager turns it off.
  bool step_graphs = true;
};

// Thrown by submit() when the queue is full (the server answers 503).
class QueueFull : public Error {
 public:
  using Error::Error;
};

struct EngineRequest {
  std::vector<int32_t> prompt_tokens;
  SamplingParams params;
  int32_t n = 1;
};

class Engine {
 public:
  // Allocates the KV cache in the model (config.num_kv_blocks blocks).
  Engine(CausalLM& model, const Tokenizer& tokenizer, EngineConfig config);
  ~Engine();

  void start();  // runs steps on a loop thread until stop()
  void stop();
  // Validates and queues a request. Throws InvalidArgument or QueueFull.
  std::shared_ptr<RequestStream> submit(EngineRequest request);
  // Stops a request's sequences and frees their blocks (from any thread).
  void abort(const std::shared_ptr<RequestStream>& stream);

  // One scheduling step on the calling thread (tests). False when idle.
  bool step();
  // Steps until no request is left (tests).
  void run_until_idle();

  const EngineConfig& config() const { return config_; }
  const BatchSampler& sampler() const { return *sampler_; }
  EngineMetrics& metrics() { return metrics_; }
  const BlockManager& block_manager() const { return blocks_; }
  int32_t vocab_limit() const { return vocab_limit_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct SeqState {
    SequencePtr seq;
    std::shared_ptr<RequestStream> stream;
    OutputText text;
    Clock::time_point arrival, first_token, last_token;
    bool scheduled_once = false;
  };

  void validate(const EngineRequest& request) const;
  void loop();
  void drain_inbox();
  void add_request(const std::shared_ptr<RequestStream>& stream, EngineRequest& request);
  void abort_now(const std::shared_ptr<RequestStream>& stream);
  ForwardBatch make_batch(const SchedulerOutput& out) const;
  void consume_logits(const SchedulerOutput& out, const Tensor& logits);
  void process_token(SeqState& state, const SampledToken& sampled);
  bool is_stop_token(const Sequence& seq, int32_t token) const;
  std::vector<int32_t> banned_tokens(const Sequence& seq) const;
  void finish(SeqState& state, FinishReason reason, ChoiceDelta delta);
  void fail_all(const std::string& message);
  void update_gauges();
  void note_scheduled(const SchedulerOutput& out);

  CausalLM& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  int32_t vocab_limit_;
  std::vector<int32_t> eos_ids_;
  BlockManager blocks_;
  Scheduler scheduler_;
  EngineMetrics metrics_;
  std::unique_ptr<BatchSampler> sampler_;
  std::unordered_map<int64_t, SeqState> seqs_;  // by sequence id; loop thread only
  std::unordered_map<int64_t, int32_t> open_choices_;  // request id -> unfinished choices
  int64_t next_seq_id_ = 0;

  std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::vector<std::pair<std::shared_ptr<RequestStream>, EngineRequest>> new_requests_;
  std::vector<std::shared_ptr<RequestStream>> aborts_;
  int64_t next_request_id_ = 0;
  std::atomic<int64_t> unfinished_requests_{0};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mx
