// The interface between the engine and a model: the engine owns scheduling and
// the block tables; the model owns the paged KV storage and computes logits.
// A step mixes prefill chunks and decode tokens of many sequences.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/shard.h"
#include "io/model_config.h"
#include "quant/linear_weight.h"

namespace mx {

struct StepGraphConfig;  // model/step_graphs.h

// Auto = BF16. F32 is a reference mode for tests and the golden comparisons.
// FP8 is E4M3 with one F32 scale per token per layer (and per K / V).
enum class KvCacheDtype { Auto, BF16, FP8, F32 };

struct SequenceSlice {
  int64_t num_cached_tokens = 0;     // tokens already in the KV cache
  int64_t num_new_tokens = 0;        // tokens of this step (prefill chunk, or 1 in decode)
  std::vector<int32_t> block_table;  // KV block ids covering cached + new tokens
  bool need_logits = true;           // logits for the last new token
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // new tokens of all sequences, concatenated in seqs order
  std::vector<int32_t> positions;  // position of each new token
  std::vector<SequenceSlice> seqs;
};

struct LoadOptions {
  ActivationMode activation_mode = ActivationMode::W4A16;  // MXFP4 Linears: W4A16 or W4A4
  int num_threads = 0;                                     // CPU backend: 0 = all cores
  std::string device = "cpu";                              // Ops backend (ops/backend_registry.h): cpu, cuda
  int device_index = 0;                                    // which GPU for device = cuda
  bool exact_numerics = false;             // CUDA: the CPU's F32 numerics (ops/backend_registry.h)
  std::string attention_kernel = "auto";   // CUDA attention kernel family (ops/backend_registry.h)
  std::string mxfp4_gemm_kernel = "auto";  // CUDA: forced MXFP4 GEMM kernel (ops/backend_registry.h)
  std::string moe_kernel = "auto";         // CUDA: forced fused-MoE path (ops/backend_registry.h)
  std::string w4a4_mma = "auto";           // CUDA W4A4 MoE prefill MMAs (ops/backend_registry.h)
  // --profile-ops: time every op on the backend's clock and log a per-op
  // table per kind of step when the model is destroyed (ops/profiling_ops.h).
  bool profile_ops = false;
  // "auto": the checkpoint's weights; "dummy": random weights of the config's
  // shapes and formats (quant/dummy_source.h), seeded by dummy_seed.
  std::string load_format = "auto";
  uint64_t dummy_seed = 0;
  // Tensor parallelism (docs/parallel.md): > 1 makes load_causal_lm start one
  // worker thread per rank (device_index + rank) and shard the weights;
  // expert_parallel gives each rank whole MoE experts instead of slices.
  int tensor_parallel_size = 1;
  bool expert_parallel = false;
  // Called once (on the engine's thread) when a rank fails, after the group
  // stopped; serve uses it to shut down with the rank's error.
  std::function<void(const std::string&)> on_parallel_failure;
  // Tests: called on each rank's thread before its forward step (0-based);
  // throwing there simulates a failing rank.
  std::function<void(int rank, int64_t step)> parallel_step_hook;
  // Set by the parallel loader for each rank's model (not by callers).
  ShardSpec shard;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelConfig& config() const = 0;
  // Bytes of KV storage one token takes across all layers for a dtype.
  virtual int64_t kv_bytes_per_token(KvCacheDtype dtype) const = 0;
  // Allocates num_blocks blocks of block_size tokens for every layer.
  virtual void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) = 0;
  // Writes the new tokens' KV into their blocks and returns F32 logits
  // [number of seqs with need_logits, vocab_size], in seqs order.
  virtual Tensor forward(const ForwardBatch& batch) = 0;
  // The same logits left where the backend computed them (GPU memory on the
  // CUDA backend), for a sampler that runs there (engine/batch_sampler.h).
  virtual Tensor forward_resident(const ForwardBatch& batch) { return forward(batch); }
  // Records decode steps as step graphs (CUDA graphs) where the backend can
  // (model/step_graphs.h); call after allocate_kv_cache. Logits of a replayed
  // step stay valid until the next forward. A no-op elsewhere.
  virtual void enable_step_graphs(const StepGraphConfig& config) { (void)config; }
  // "DeepseekV3 (kimi_k25), 4 layers, mxfp4 experts (W4A4), cpu"
  virtual std::string describe() const = 0;
};

// Loads config.json + safetensors from a directory (GGUF files: see io/gguf.h).
std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options);

}  // namespace mx
