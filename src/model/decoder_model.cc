#include "model/decoder_model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "ops/backend_registry.h"
#include "ops/profiling_ops.h"
#include "quant/dummy_source.h"

namespace mx {

DecoderModel::DecoderModel(ModelConfig config, const LoadOptions& options, std::unique_ptr<TensorSource> source)
    : config_(std::move(config)), options_(options), source_(std::move(source)) {
  if (options.num_threads > 0) ThreadPool::set_global_threads(options.num_threads);
  BackendOptions backend;
  backend.activation_mode = options.activation_mode;
  backend.device_index = options.device_index;
  backend.exact_numerics = options.exact_numerics;
  backend.attention_kernel = options.attention_kernel;
  backend.mxfp4_gemm_kernel = options.mxfp4_gemm_kernel;
  backend.moe_kernel = options.moe_kernel;
  backend.w4a4_mma = options.w4a4_mma;
  ops_ = make_ops(options.device, backend);
  if (options.profile_ops)
    ops_ = std::make_unique<ProfilingOps>(std::move(ops_), fmt::format("{} rank {}", options.device, options.shard.rank));
  // The all-reduces of a sharded step run in order on the backend's stream.
  if (options.shard.sharded() && options.shard.comm) options.shard.comm->set_device_stream(ops_->device_stream());
  loader_ = std::make_unique<WeightLoader>(config_, *source_);
}

void DecoderModel::load_layers(const LayerBlocks& make_blocks) {
  const WeightLoader& w = *loader_;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i);
    DecoderLayer l;
    l.input_norm = w.tensor(prefix + ".input_layernorm.weight");
    l.post_attention_norm = w.tensor(prefix + ".post_attention_layernorm.weight");
    make_blocks(i, prefix, l);
    layers_.push_back(std::move(l));
  }
  if (layers_.empty()) fail_input("{} config has no layers", config_.model_type);
  embed_ = w.tensor("model.embed_tokens.weight");
  final_norm_ = w.tensor("model.norm.weight");
  // Tied: the head is the embedding even if the file also holds an
  // lm_head.weight (as transformers and vLLM do).
  if (config_.tie_word_embeddings) {
    lm_head_.name = "lm_head (tied to embed_tokens)";
    lm_head_.format = WeightFormat::Dense;
    lm_head_.out_features = embed_.dim(0);
    lm_head_.in_features = embed_.dim(1);
    lm_head_.weight = embed_;
  } else if (options_.shard.rank == 0) {
    lm_head_ = w.linear("lm_head");  // replicated; only rank 0 computes logits
  }
  if (embed_.ndim() != 2 || embed_.dim(1) != config_.hidden_size)
    fail_input("embed_tokens {} does not match hidden_size {}", embed_.describe(), config_.hidden_size);
  // A dummy source would generate every tensor again for the survey.
  const auto* dummy = dynamic_cast<const DummyTensorSource*>(source_.get());
  weight_summary_ = dummy ? dummy->summary() : w.summary();
  // One line: the loader's summary lists one format per line.
  while (!weight_summary_.empty() && weight_summary_.back() == '\n') weight_summary_.pop_back();
  for (char& ch : weight_summary_)
    if (ch == '\n') ch = ';';
}

int64_t DecoderModel::kv_bytes_per_token(KvCacheDtype dtype) const {
  int64_t total = 0;
  for (const DecoderLayer& l : layers_) total += l.attention->kv_bytes_per_token(kv_storage_dtype(dtype));
  return total;
}

void DecoderModel::allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) {
  if (num_blocks <= 0 || block_size <= 0)
    fail_input("KV cache needs positive block count and size, got {} x {}", num_blocks, block_size);
  // A backend with step graphs gets one block more: the scratch block that
  // padding sequences of a recorded decode step write (model/step_graphs.h).
  const bool scratch = ops_->supports_step_graphs() && num_blocks < INT32_MAX;
  for (DecoderLayer& l : layers_)
    l.attention->allocate(*ops_, num_blocks + (scratch ? 1 : 0), block_size, kv_storage_dtype(dtype));
  scratch_block_ = scratch ? int32_t(num_blocks) : -1;
  block_size_ = block_size;
  kv_allocated_ = true;
}

void DecoderModel::enable_step_graphs(const StepGraphConfig& config) {
  if (!kv_allocated_) fail("enable_step_graphs called before allocate_kv_cache");
  if (!ops_->supports_step_graphs() || scratch_block_ < 0 || config.batch_sizes.empty()) return;
  graphs_ = config;
}

StepContext DecoderModel::make_step(const ForwardBatch& batch, int64_t table_width) const {
  const int64_t tokens = int64_t(batch.token_ids.size());
  if (int64_t(batch.positions.size()) != tokens)
    fail_input("forward: {} positions for {} tokens", batch.positions.size(), tokens);
  StepContext step;
  step.positions = batch.positions;
  step.attention.block_size = block_size_;
  step.decode.block_size = block_size_;
  step.attention.table_width = step.decode.table_width = table_width;
  int64_t row = 0;
  for (const SequenceSlice& s : batch.seqs) {
    if (s.num_new_tokens < 0 || s.num_cached_tokens < 0) fail_input("forward: negative token counts in a sequence");
    if (s.need_logits && s.num_new_tokens == 0) fail_input("forward: a sequence asks for logits but has no new token");
    const int64_t ctx = s.num_cached_tokens + s.num_new_tokens;
    if (int64_t(s.block_table.size()) * block_size_ < ctx)
      fail_input("forward: {} blocks of {} cannot hold {} tokens", s.block_table.size(), block_size_, ctx);
    for (int64_t i = s.num_cached_tokens; i < ctx; ++i)
      step.attention.slots.push_back(int64_t(s.block_table[size_t(i / block_size_)]) * block_size_ + i % block_size_);
    step.attention.seqs.push_back({row, s.num_new_tokens, s.num_cached_tokens, s.block_table});
    if (s.num_new_tokens == 1) {
      step.decode.seqs.push_back({int64_t(step.decode_rows.size()), 1, s.num_cached_tokens, s.block_table});
      step.decode_rows.push_back(row);
    }
    row += s.num_new_tokens;
  }
  if (row != tokens) fail_input("forward: sequences cover {} tokens but the batch has {}", row, tokens);
  return step;
}

void DecoderModel::all_reduce(Tensor& x) {
  if (!options_.shard.sharded()) return;
  ops_->begin_region("all_reduce");
  options_.shard.all_reduce(x);
  ops_->end_region();
}

Tensor DecoderModel::forward(const ForwardBatch& batch) { return ops_->to_host(forward_resident(batch)); }

namespace {

// Logits only for the last new token of sequences that want them.
std::vector<int64_t> logit_rows(const ForwardBatch& batch) {
  std::vector<int64_t> rows;
  int64_t row = 0;
  for (const SequenceSlice& s : batch.seqs) {
    row += s.num_new_tokens;
    if (s.need_logits && s.num_new_tokens > 0) rows.push_back(row - 1);
  }
  return rows;
}

}  // namespace

Tensor DecoderModel::forward_resident(const ForwardBatch& batch) {
  if (!kv_allocated_) fail("forward called before allocate_kv_cache");
  if (graphs_)
    if (std::optional<DecodeGraphPlan> plan = plan_decode_graph(batch, *graphs_, block_size_))
      return forward_recorded(batch, *plan);
  StepContext step = make_step(batch, 0);
  const std::vector<int64_t> rows = logit_rows(batch);
  ops_->begin_step();
  prepare_step(batch, step, rows);
  return run_layers(batch, step, rows);
}

Tensor DecoderModel::forward_recorded(const ForwardBatch& batch, const DecodeGraphPlan& plan) {
  const ForwardBatch padded = pad_decode_batch(batch, plan, scratch_block_);
  const StepContext step = make_step(padded, plan.table_width);
  const std::vector<int64_t> rows = logit_rows(padded);
  Ops& ops = *ops_;
  check_recordable_inputs(padded);
  ops.begin_static_step(plan.key);
  prepare_step(padded, step, rows);
  Tensor out;
  if (ops.replay_step(out)) return out.slice_rows(0, plan.batch);
  // The first step of a shape runs eagerly: it uploads weights and sets up
  // what the ops create at first use, which a recording cannot contain.
  // Recorded shapes are capped: each holds its own instantiated kernels. The
  // rule depends only on the keys seen, so every rank of a sharded model
  // makes the same choice.
  constexpr size_t kMaxRecordedShapes = 64;
  const bool full = graph_recorded_.size() >= kMaxRecordedShapes && !graph_recorded_.count(plan.key);
  if (graph_failed_.count(plan.key) || graph_seen_.insert(plan.key).second || full)
    return run_layers(padded, step, rows).slice_rows(0, plan.batch);
  const int64_t vocab = options_.shard.rank == 0 ? lm_head_.out_features : 0;
  if (!ops.begin_capture(DType::F32, {plan.padded_batch, vocab}))
    return run_layers(padded, step, rows).slice_rows(0, plan.batch);  // recorded at a later step
  try {
    out = ops.end_capture(run_layers(padded, step, rows));
    graph_recorded_.insert(plan.key);
    if (options_.shard.rank == 0)
      log::info("recorded a CUDA graph for decode steps of {} sequences (block tables {} wide; {} shapes recorded)",
                plan.padded_batch, plan.table_width, graph_recorded_.size());
  } catch (const std::exception& e) {
    ops.abort_capture();
    graph_failed_.insert(plan.key);
    log::warn("decode steps of {} sequences (table width {}) run without a CUDA graph: {}", plan.padded_batch,
              plan.table_width, e.what());
    out = run_layers(padded, step, rows);
  }
  return out.slice_rows(0, plan.batch);
}

// A replayed step runs no op, so the host checks the ops make on their
// inputs are made here: token ids inside the vocabulary, block ids inside the
// cache (the engine's own blocks or the scratch block).
void DecoderModel::check_recordable_inputs(const ForwardBatch& batch) const {
  const int64_t vocab = embed_.dim(0);
  for (int32_t id : batch.token_ids)
    if (id < 0 || id >= vocab) fail_input("token id {} is outside the vocabulary [0, {})", id, vocab);
  for (const SequenceSlice& s : batch.seqs) {
    const size_t used = size_t((s.num_cached_tokens + s.num_new_tokens + block_size_ - 1) / block_size_);
    for (size_t b = 0; b < used && b < s.block_table.size(); ++b)
      if (s.block_table[b] < 0 || s.block_table[b] > scratch_block_)
        fail_input("forward: block {} outside the {} cache blocks", s.block_table[b], scratch_block_ + 1);
  }
}

void DecoderModel::prepare_step(const ForwardBatch& batch, const StepContext& step,
                                const std::vector<int64_t>& logit_rows) {
  Ops& ops = *ops_;
  ops.prepare(step.positions);
  ops.prepare(batch.token_ids);
  ops.prepare(step.attention);
  if (!step.decode.seqs.empty()) {
    ops.prepare(step.decode);
    ops.prepare(step.decode_rows);
  }
  ops.prepare(logit_rows);
}

Tensor DecoderModel::run_layers(const ForwardBatch& batch, const StepContext& step,
                                const std::vector<int64_t>& rows) {
  Ops& ops = *ops_;
  const float eps = float(config_.rms_norm_eps);
  Tensor x = ops.embedding(embed_, batch.token_ids);
  Tensor h = ops.rms_norm(x, layers_.front().input_norm, eps);
  for (size_t i = 0; i < layers_.size(); ++i) {
    DecoderLayer& l = layers_[i];
    // Sharded blocks return partial sums (row-parallel o_proj / down_proj):
    // one all_reduce per block completes them before the residual add.
    Tensor a = l.attention->forward(ops, h, step);
    all_reduce(a);
    h = ops.add_rms_norm(x, a, l.post_attention_norm, eps);
    Tensor y = l.ffn->forward(ops, h);
    all_reduce(y);
    const Tensor& next_norm = i + 1 < layers_.size() ? layers_[i + 1].input_norm : final_norm_;
    h = ops.add_rms_norm(x, y, next_norm, eps);
  }
  // Every rank holds the same h; only rank 0 (which samples) needs logits.
  if (options_.shard.rank != 0) return ops.empty(DType::F32, {int64_t(rows.size()), 0});
  // A decode-only step wants every row's logits, in order: no gather.
  const bool all_rows = int64_t(rows.size()) == h.dim(0);
  return ops.linear(all_rows ? h : ops.gather_rows(h, rows), lm_head_);
}

std::string DecoderModel::describe() const {
  std::string parallel;
  if (options_.shard.sharded())
    parallel = fmt::format(", rank {} of {} ({})", options_.shard.rank, options_.shard.world,
                           options_.shard.expert_parallel ? "TP attention, EP experts" : "TP");
  return fmt::format("{} ({}), {} layers, weights: {}, activations {}, {}{}", family_name(), config_.model_type,
                     layers_.size(), weight_summary_,
                     options_.activation_mode == ActivationMode::W4A4 ? "W4A4" : "W4A16", options_.device, parallel);
}

}  // namespace mx
