// The decoder stack shared by every family: embedding, pre-norm layers
// (attention + feed-forward with residuals), final norm, LM head, and the
// paged-KV bookkeeping of CausalLM. A family (llama.cc, deepseek_v3.cc) only
// says which attention and feed-forward each layer has.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/tensor_source.h"
#include "model/causal_lm.h"
#include "model/layers.h"
#include "model/step_graphs.h"

namespace mx {

struct DecoderLayer {
  Tensor input_norm, post_attention_norm;
  std::unique_ptr<Attention> attention;
  std::unique_ptr<FeedForward> ffn;
};

class DecoderModel : public CausalLM {
 public:
  DecoderModel(ModelConfig config, const LoadOptions& options, std::unique_ptr<TensorSource> source);

  const ModelConfig& config() const override { return config_; }
  int64_t kv_bytes_per_token(KvCacheDtype dtype) const override;
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) override;
  Tensor forward(const ForwardBatch& batch) override;
  Tensor forward_resident(const ForwardBatch& batch) override;
  void enable_step_graphs(const StepGraphConfig& config) override;
  std::string describe() const override;

 protected:
  // What a family puts in one layer (prefix "model.layers.<i>"): its
  // attention and feed-forward blocks.
  using LayerBlocks = std::function<void(int64_t layer, const std::string& prefix, DecoderLayer& l)>;
  // Builds every layer (norms from the file, blocks from make_blocks), then the
  // embedding, final norm and LM head. Called by a family's constructor.
  void load_layers(const LayerBlocks& make_blocks);
  virtual std::string family_name() const = 0;

  ModelConfig config_;
  LoadOptions options_;
  std::unique_ptr<TensorSource> source_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<WeightLoader> loader_;
  RopeTable rope_;
  Tensor embed_, final_norm_;
  LinearWeight lm_head_;
  std::vector<DecoderLayer> layers_;
  std::string weight_summary_;

 private:
  // table_width: AttentionMeta::table_width (a static step's).
  StepContext make_step(const ForwardBatch& batch, int64_t table_width) const;
  void check_recordable_inputs(const ForwardBatch& batch) const;
  // Uploads the step's host data once (Ops::prepare), in a fixed order.
  void prepare_step(const ForwardBatch& batch, const StepContext& step, const std::vector<int64_t>& logit_rows);
  // Embedding, layers, final norm and the LM head over rows logit_rows.
  Tensor run_layers(const ForwardBatch& batch, const StepContext& step, const std::vector<int64_t>& logit_rows);
  // A decode step through a step graph: replayed, recorded, or (the first time
  // a shape is seen, or when recording failed) run eagerly as a static step.
  Tensor forward_recorded(const ForwardBatch& batch, const DecodeGraphPlan& plan);
  // Completes a row-parallel block's partial sums across ranks (a no-op
  // unsharded), marked as the region "all_reduce" for --profile-ops.
  void all_reduce(Tensor& x);
  int64_t block_size_ = 0;
  bool kv_allocated_ = false;
  std::optional<StepGraphConfig> graphs_;
  int32_t scratch_block_ = -1;  // the KV block padding sequences write (graphs only)
  std::set<uint64_t> graph_seen_, graph_failed_, graph_recorded_;
};

std::unique_ptr<CausalLM> make_llama(ModelConfig config, const LoadOptions& options,
                                     std::unique_ptr<TensorSource> source);
std::unique_ptr<CausalLM> make_deepseek_v3(ModelConfig config, const LoadOptions& options,
                                           std::unique_ptr<TensorSource> source);

}  // namespace mx
