// Testing only: a model wrapper that makes one forward pass fail, so tests can
// check what a worker/GPU error does to the requests of that step (they end
// with an error: a 500, or an error event in a stream), that the engine logs
// it, frees their KV blocks and goes on serving. Enabled by
// `mxserve serve --debug-fail-forward-at-step N` (docs/reliability.md);
// without the flag the model is used as loaded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "model/causal_lm.h"

namespace mx::cli {

class DebugFaultyModel : public CausalLM {
 public:
  // The fail_at_step-th call of forward() (1-based) throws instead of running.
  DebugFaultyModel(std::unique_ptr<CausalLM> inner, int64_t fail_at_step)
      : inner_(std::move(inner)), fail_at_step_(fail_at_step) {}

  const ModelConfig& config() const override { return inner_->config(); }
  int64_t kv_bytes_per_token(KvCacheDtype dtype) const override { return inner_->kv_bytes_per_token(dtype); }
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) override {
    inner_->allocate_kv_cache(num_blocks, block_size, dtype);
  }
  Tensor forward(const ForwardBatch& batch) override {
    if (++steps_ == fail_at_step_)
      fail("injected forward failure at step {} (--debug-fail-forward-at-step, a testing flag)", steps_);
    return inner_->forward(batch);
  }
  void enable_step_graphs(const StepGraphConfig& config) override { inner_->enable_step_graphs(config); }
  std::string describe() const override { return inner_->describe() + fmt::format(", failing forward step {} (testing)", fail_at_step_); }

 private:
  std::unique_ptr<CausalLM> inner_;
  int64_t fail_at_step_;
  int64_t steps_ = 0;  // forward() runs on the engine's loop thread only
};

}  // namespace mx::cli
