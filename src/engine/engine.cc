#include "engine/engine.h"

#include <algorithm>
#include <limits>
#include <random>

#include "core/log.h"
#include "model/step_graphs.h"

namespace mx {

namespace {
double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

uint64_t choice_seed(uint64_t seed, int32_t choice) {
  // Choice 0 uses the seed as given; the others get distinct, reproducible streams.
  return choice == 0 ? seed : seed ^ (0x9e3779b97f4a7c15ull * uint64_t(choice));
}
}  // namespace

Engine::Engine(CausalLM& model, const Tokenizer& tokenizer, EngineConfig config)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      vocab_limit_(int32_t(std::min<int64_t>(model.config().vocab_size, tokenizer.vocab_size()))),
      eos_ids_(tokenizer.eos_ids()),
      blocks_(config.num_kv_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_({config.max_num_seqs, config.max_num_batched_tokens}, blocks_),
      sampler_(make_batch_sampler(config.sampler_device, config.device_index)) {
  if (config.max_model_len < 2) fail_input("--max-model-len must be at least 2, got {}", config.max_model_len);
  if (config.num_kv_blocks * config.block_size < config.max_model_len)
    fail_input("the KV cache ({} blocks of {} tokens) cannot hold one sequence of --max-model-len {} tokens; "
               "give more KV memory or a smaller --max-model-len", config.num_kv_blocks, config.block_size, config.max_model_len);
  for (int64_t id : model.config().eos_token_ids)
    if (std::find(eos_ids_.begin(), eos_ids_.end(), int32_t(id)) == eos_ids_.end()) eos_ids_.push_back(int32_t(id));
  model_.allocate_kv_cache(config.num_kv_blocks, config.block_size, config.kv_cache_dtype);
  if (config.step_graphs) {
    StepGraphConfig graphs;
    graphs.batch_sizes = decode_graph_batch_sizes(config.max_num_seqs);
    graphs.max_blocks_per_seq = (config.max_model_len + config.block_size - 1) / config.block_size;
    model_.enable_step_graphs(graphs);
  }
  metrics_.kv_blocks_total = config.num_kv_blocks;
}

Engine::~Engine() { stop(); }

void Engine::start() {
  MX_CHECK(!thread_.joinable(), "engine already started");
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::validate(const EngineRequest& r) const {
  if (r.prompt_tokens.empty()) fail_input("the prompt is empty");
  for (int32_t t : r.prompt_tokens)
    if (t < 0 || t >= vocab_limit_) fail_input("prompt token id {} is outside the vocabulary [0, {})", t, vocab_limit_);
  if (r.n < 1 || r.n > config_.max_n) fail_input("'n' must be between 1 and {}, got {}", config_.max_n, r.n);
  r.params.validate(vocab_limit_);
  const int64_t prompt = int64_t(r.prompt_tokens.size());
  // Compared without adding: prompt + a max_tokens near INT64_MAX would overflow and pass.
  if (prompt > config_.max_model_len || r.params.max_tokens > config_.max_model_len - prompt)
    fail_input("this model's maximum context length is {} tokens; the request has {} prompt tokens and asks for {} "
               "more (max_tokens)", config_.max_model_len, prompt, r.params.max_tokens);
}

std::shared_ptr<RequestStream> Engine::submit(EngineRequest request) {
  validate(request);
  if (unfinished_requests_ >= config_.max_num_seqs + config_.max_queued_requests) {
    ++metrics_.requests_rejected;
    throw QueueFull(fmt::format("the server has {} unfinished requests, its limit; retry later", unfinished_requests_.load()));
  }
  ++unfinished_requests_;
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard lock(inbox_mutex_);
    stream = std::make_shared<RequestStream>(next_request_id_++, request.n, int64_t(request.prompt_tokens.size()));
    new_requests_.emplace_back(stream, std::move(request));
  }
  inbox_cv_.notify_all();
  return stream;
}

void Engine::abort(const std::shared_ptr<RequestStream>& stream) {
  stream->mark_cancelled();
  {
    std::lock_guard lock(inbox_mutex_);
    aborts_.push_back(stream);
  }
  inbox_cv_.notify_all();
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(inbox_mutex_);
      inbox_cv_.wait(lock, [&] { return stopping_ || scheduler_.has_work() || !new_requests_.empty() || !aborts_.empty(); });
      if (stopping_) break;
    }
    try {
      step();
    } catch (const std::exception& e) {
      log::error("engine step failed, failing its requests: {}", e.what());
      fail_all(e.what());
    }
  }
  fail_all("the server is shutting down");
}

void Engine::drain_inbox() {
  std::vector<std::pair<std::shared_ptr<RequestStream>, EngineRequest>> incoming;
  std::vector<std::shared_ptr<RequestStream>> aborts;
  {
    std::lock_guard lock(inbox_mutex_);
    incoming.swap(new_requests_);
    aborts.swap(aborts_);
  }
  for (auto& [stream, request] : incoming) add_request(stream, request);
  for (auto& stream : aborts) abort_now(stream);
}

void Engine::add_request(const std::shared_ptr<RequestStream>& stream, EngineRequest& request) {
  const auto now = Clock::now();
  metrics_.prompt_tokens += int64_t(request.prompt_tokens.size());
  open_choices_[stream->id()] = request.n;
  SequencePtr leader;
  for (int32_t i = 0; i < request.n; ++i) {
    auto seq = std::make_shared<Sequence>();
    seq->id = next_seq_id_++;
    seq->choice_index = i;
    seq->tokens = request.prompt_tokens;
    seq->num_prompt_tokens = int64_t(request.prompt_tokens.size());
    seq->params = request.params;
    const uint64_t seed = request.params.seed ? *request.params.seed : std::random_device{}() * 0x100000001ull ^ std::random_device{}();
    seq->seed = choice_seed(seed, i);
    seq->rng.seed(seq->seed);
    if (leader) seq->prefill_leader = leader;
    else leader = seq;
    seqs_.emplace(seq->id, SeqState{seq, stream, OutputText(request.params.stop), now, {}, {}, false});
    scheduler_.add(seq);
  }
}

void Engine::abort_now(const std::shared_ptr<RequestStream>& stream) {
  std::vector<int64_t> ids;
  for (auto& [id, state] : seqs_)
    if (state.stream == stream) ids.push_back(id);
  for (int64_t id : ids) finish(seqs_.at(id), FinishReason::Abort, ChoiceDelta{});
}

bool Engine::step() {
  drain_inbox();
  SchedulerOutput out = scheduler_.schedule();
  metrics_.preemptions += int64_t(out.preempted.size());
  if (out.empty()) {
    update_gauges();
    return false;
  }
  note_scheduled(out);
  const ForwardBatch batch = make_batch(out);
  const Tensor logits = sampler_->wants_device_logits() ? model_.forward_resident(batch) : model_.forward(batch);
  scheduler_.on_step_done(out);
  consume_logits(out, logits);
  update_gauges();
  return true;
}

void Engine::run_until_idle() {
  while (step() || scheduler_.has_work()) {
  }
}

ForwardBatch Engine::make_batch(const SchedulerOutput& out) const {
  ForwardBatch batch;
  batch.token_ids.reserve(size_t(out.num_tokens()));
  for (const auto& s : out.scheduled) {
    const Sequence& seq = *s.seq;
    for (int64_t p = seq.num_computed_tokens; p < seq.num_computed_tokens + s.num_new_tokens; ++p) {
      batch.token_ids.push_back(seq.tokens[size_t(p)]);
      batch.positions.push_back(int32_t(p));
    }
    batch.seqs.push_back({seq.num_computed_tokens, s.num_new_tokens, seq.block_table, s.need_logits});
  }
  return batch;
}

void Engine::note_scheduled(const SchedulerOutput& out) {
  const auto now = Clock::now();
  for (const auto& s : out.scheduled) {
    SeqState& state = seqs_.at(s.seq->id);
    if (state.scheduled_once) continue;
    state.scheduled_once = true;
    metrics_.queue_time.observe(seconds(now - state.arrival));
  }
}

void Engine::consume_logits(const SchedulerOutput& out, const Tensor& logits) {
  std::vector<SamplingRow> rows;
  for (const auto& s : out.scheduled) {
    if (!s.need_logits) continue;
    Sequence& seq = *s.seq;
    rows.push_back({&seq, seq.num_output_tokens() < seq.params.min_tokens ? banned_tokens(seq) : std::vector<int32_t>{}});
  }
  if (rows.empty()) return;
  MX_CHECK(int64_t(rows.size()) <= logits.dim(0), "model returned {} logit rows, the step needs {}", logits.dim(0),
           rows.size());
  const std::vector<SampledToken> sampled = sampler_->sample(logits, rows, vocab_limit_);
  for (size_t i = 0; i < rows.size(); ++i) process_token(seqs_.at(rows[i].seq->id), sampled[i]);
}

// Before min_tokens, stop tokens cannot be sampled.
std::vector<int32_t> Engine::banned_tokens(const Sequence& seq) const {
  std::vector<int32_t> banned;
  for (int32_t t : seq.params.stop_token_ids)
    if (t < vocab_limit_) banned.push_back(t);
  if (!seq.params.ignore_eos)
    for (int32_t t : eos_ids_)
      if (t >= 0 && t < vocab_limit_) banned.push_back(t);
  return banned;
}

bool Engine::is_stop_token(const Sequence& seq, int32_t token) const {
  const auto& stops = seq.params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return true;
  return !seq.params.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

void Engine::process_token(SeqState& state, const SampledToken& sampled) {
  Sequence& seq = *state.seq;
  const auto now = Clock::now();
  seq.tokens.push_back(sampled.token);
  ++metrics_.generation_tokens;
  if (seq.num_output_tokens() == 1) {
    state.first_token = now;
    metrics_.time_to_first_token.observe(seconds(now - state.arrival));
  } else {
    metrics_.inter_token_latency.observe(seconds(now - state.last_token));
  }
  state.last_token = now;

  ChoiceDelta delta;
  delta.index = seq.choice_index;
  std::optional<FinishReason> reason;
  if (is_stop_token(seq, sampled.token)) {
    reason = FinishReason::Stop;
    delta.stop_token = sampled.token;
  } else {
    const bool hide = seq.params.skip_special_tokens && tokenizer_.is_special(sampled.token);
    const bool may_stop = seq.num_output_tokens() >= seq.params.min_tokens;
    if (state.text.append(hide ? std::string() : tokenizer_.token_bytes(sampled.token), may_stop)) {
      reason = FinishReason::Stop;
      delta.stop_string = state.text.matched_stop();
    }
    delta.token_ids.push_back(sampled.token);
    if (seq.params.logprobs >= 0) delta.logprobs.push_back(sampled.logprob);
  }
  if (!reason && seq.num_output_tokens() >= seq.params.max_tokens) reason = FinishReason::Length;
  if (!reason) {
    delta.text = state.text.take_ready();
    delta.num_generated = seq.num_output_tokens();
    state.stream->push(std::move(delta));
    return;
  }
  finish(state, *reason, std::move(delta));
}

void Engine::finish(SeqState& state, FinishReason reason, ChoiceDelta delta) {
  Sequence& seq = *state.seq;
  const auto now = Clock::now();
  delta.index = seq.choice_index;
  delta.text += state.text.take_ready();
  delta.text += state.text.take_rest();
  delta.num_generated = seq.num_output_tokens();
  delta.finish_reason = reason;
  metrics_.e2e_latency.observe(seconds(now - state.arrival));
  if (seq.num_output_tokens() > 1)
    metrics_.time_per_output_token.observe(seconds(state.last_token - state.first_token) / double(seq.num_output_tokens() - 1));
  scheduler_.remove(state.seq);
  const int64_t request_id = state.stream->id();
  // The request stops counting against the queue limit before its client can
  // see the last delta: a client that sends its next request right after the
  // answer must not be refused with 503 by a count that is about to drop.
  if (--open_choices_[request_id] == 0) {
    open_choices_.erase(request_id);
    --unfinished_requests_;
    ++metrics_.requests_finished;
  }
  state.stream->push(std::move(delta));
  seqs_.erase(seq.id);  // `state` dies here
}

void Engine::fail_all(const std::string& message) {
  drain_inbox();
  std::vector<int64_t> ids;
  for (auto& [id, state] : seqs_) ids.push_back(id);
  for (int64_t id : ids) {
    ChoiceDelta delta;
    delta.error = message;
    finish(seqs_.at(id), FinishReason::Error, std::move(delta));
  }
  update_gauges();
}

void Engine::update_gauges() {
  metrics_.num_running = scheduler_.num_running();
  metrics_.num_waiting = scheduler_.num_waiting();
  metrics_.kv_blocks_used = blocks_.num_used_blocks();
  metrics_.prefix_queried_tokens = blocks_.prefix_stats().queried_tokens;
  metrics_.prefix_hit_tokens = blocks_.prefix_stats().hit_tokens;
}

}  // namespace mx
