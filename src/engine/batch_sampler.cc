#include "engine/batch_sampler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <map>
#include <mutex>

#include "core/error.h"

namespace mx {
namespace {

class CpuBatchSampler : public BatchSampler {
 public:
  std::vector<SampledToken> sample(const Tensor& logits, std::span<SamplingRow> rows, int32_t vocab_limit) override {
    std::vector<SampledToken> out;
    out.reserve(rows.size());
    if (rows.empty()) return out;
    MX_CHECK(logits.dtype() == DType::F32 && logits.ndim() == 2, "CPU sampler: expected F32 [rows, vocab] logits, got {}",
             logits.describe());
    MX_CHECK(int64_t(rows.size()) <= logits.dim(0), "model returned {} logit rows, the step needs {}", logits.dim(0),
             rows.size());
    const int64_t vocab = logits.dim(1);
    const float* base = logits.data<float>();
    std::vector<float> banned_row;
    for (size_t r = 0; r < rows.size(); ++r) {
      Sequence& seq = *rows[r].seq;
      std::span<const float> row(base + int64_t(r) * vocab, size_t(vocab));
      if (!rows[r].banned.empty()) {
        banned_row.assign(row.begin(), row.end());
        for (int32_t t : rows[r].banned)
          if (t >= 0 && t < vocab) banned_row[size_t(t)] = -std::numeric_limits<float>::infinity();
        row = banned_row;
      }
      out.push_back(sample_token(row, seq.params, seq.tokens, seq.num_prompt_tokens, seq.rng, vocab_limit));
    }
    return out;
  }
  bool wants_device_logits() const override { return false; }
  std::string name() const override { return "cpu"; }
};

std::unique_ptr<BatchSampler> make_cpu(int) { return make_cpu_batch_sampler(); }

struct Registry {
  std::mutex mutex;
  std::map<std::string, BatchSamplerFactory> factories{{"cpu", &make_cpu}};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::unique_ptr<BatchSampler> make_cpu_batch_sampler() { return std::make_unique<CpuBatchSampler>(); }

void register_batch_sampler(const std::string& device, BatchSamplerFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[device] = factory;
}

std::vector<std::string> available_batch_samplers() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<BatchSampler> make_batch_sampler(const std::string& device, int device_index) {
  BatchSamplerFactory factory = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(device);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    const std::string hint = device == "cuda" ? " (this binary was built without CUDA: configure with -DMXSERVE_CUDA=ON)" : "";
    fail_input("no sampler for device '{}'{}; available: {}", device, hint, fmt::join(available_batch_samplers(), ", "));
  }
  return factory(device_index);
}

}  // namespace mx
