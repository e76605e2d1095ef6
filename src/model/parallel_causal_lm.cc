#include "model/parallel_causal_lm.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "dist/communicator_factory.h"
#include "dist/rank_workers.h"

namespace mx {

namespace {

class ParallelCausalLM : public CausalLM {
 public:
  ParallelCausalLM(const std::filesystem::path& model_dir, const LoadOptions& options)
      : world_(options.tensor_parallel_size),
        comms_(make_parallel_communicators(options.device, world_, options.device_index)),
        models_(size_t(world_)),
        expert_parallel_(options.expert_parallel),
        on_failure_(options.on_parallel_failure),
        step_hook_(options.parallel_step_hook),
        workers_(world_, [this](const std::string& why) {
          for (auto& c : comms_) c->abort(why);
        }) {
    // One pool for all ranks, sized once (a rank's constructor would reset it).
    if (options.num_threads > 0) ThreadPool::set_global_threads(options.num_threads);
    workers_.run([&](int rank) {
      LoadOptions o = options;
      o.num_threads = 0;
      o.tensor_parallel_size = 1;
      o.device_index = options.device_index + rank;
      o.shard = ShardSpec{rank, world_, options.expert_parallel, comms_[size_t(rank)].get()};
      models_[size_t(rank)] = load_causal_lm(model_dir, o);
    });
  }

  ~ParallelCausalLM() override {
    // Each rank's model is freed on its own thread (its device's context).
    if (!workers_.failed()) workers_.run([&](int r) { models_[size_t(r)].reset(); });
  }

  const ModelConfig& config() const override { return models_[0]->config(); }
  // Per device: what one rank's cache takes (each rank holds its heads' KV).
  int64_t kv_bytes_per_token(KvCacheDtype dtype) const override { return models_[0]->kv_bytes_per_token(dtype); }
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) override {
    guarded([&](int r) { models_[size_t(r)]->allocate_kv_cache(num_blocks, block_size, dtype); });
  }
  Tensor forward(const ForwardBatch& batch) override {
    Tensor logits;
    const int64_t step = steps_++;
    guarded([&](int r) {
      if (step_hook_) step_hook_(r, step);
      Tensor t = models_[size_t(r)]->forward(batch);
      if (r == 0) logits = t;
    });
    return logits;
  }
  std::string describe() const override {
    return fmt::format("{}; {} ranks ({})", models_[0]->describe(), world_,
                       expert_parallel_ ? "tensor + expert parallel" : "tensor parallel");
  }

 private:
  void guarded(const std::function<void(int)>& job) {
    try {
      workers_.run(job);
    } catch (const Error& e) {
      if (on_failure_ && !reported_) {
        reported_ = true;
        on_failure_(e.what());
      }
      throw;
    }
  }

  int world_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<CausalLM>> models_;
  bool expert_parallel_;
  std::function<void(const std::string&)> on_failure_;
  std::function<void(int, int64_t)> step_hook_;
  int64_t steps_ = 0;
  bool reported_ = false;
  RankWorkers workers_;  // last: its threads stop before the models go
};

}  // namespace

std::unique_ptr<CausalLM> load_parallel_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options) {
  if (options.tensor_parallel_size < 1)
    fail_input("--tensor-parallel-size {}: must be at least 1", options.tensor_parallel_size);
  auto model = std::make_unique<ParallelCausalLM>(model_dir, options);
  log::info("loaded {}", model->describe());
  return model;
}

}  // namespace mx
