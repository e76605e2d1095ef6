// Samples the next token of every sequence of a step at once, so the engine
// stays backend-agnostic: the CPU implementation runs sampler.h's sample_token
// per row (bit-identical to the engine's original loop, mt19937_64 per
// sequence); a device implementation (src/cuda/sampling, registered by the
// CUDA build) samples on the GPU from device-resident logits and brings back
// only the chosen tokens and the requested logprobs.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/sampler.h"
#include "engine/sequence.h"

namespace mx {

// One logits row of the step and the sequence it samples for.
struct SamplingRow {
  Sequence* seq = nullptr;  // params, prompt + output tokens, RNG (CPU) or seed (device)
  // Tokens that cannot be sampled this step (stop tokens before min_tokens):
  // their logits become -inf before anything else, logprobs included.
  std::vector<int32_t> banned;
};

class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  // logits: F32 [>= rows.size(), vocab], row i for rows[i]; host or device
  // memory (see wants_device_logits). Ids at or beyond vocab_limit are never
  // sampled. Returns one SampledToken per row, in order.
  virtual std::vector<SampledToken> sample(const Tensor& logits, std::span<SamplingRow> rows,
                                           int32_t vocab_limit) = 0;
  // True when the sampler reads logits where the model computed them
  // (CausalLM::forward_resident) rather than a host copy (CausalLM::forward).
  virtual bool wants_device_logits() const = 0;
  virtual std::string name() const = 0;
};

// sample_token per row on the host.
std::unique_ptr<BatchSampler> make_cpu_batch_sampler();

// A device sampler, registered by the binary that has the device (as Ops
// backends are, ops/backend_registry.h), so the engine never depends on CUDA.
using BatchSamplerFactory = std::unique_ptr<BatchSampler> (*)(int device_index);
void register_batch_sampler(const std::string& device, BatchSamplerFactory factory);
// "cpu" is always there; throws InvalidArgument naming the available ones.
std::unique_ptr<BatchSampler> make_batch_sampler(const std::string& device, int device_index);
std::vector<std::string> available_batch_samplers();

}  // namespace mx
