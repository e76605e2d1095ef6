// DeepSeek-V3 architecture as used by Kimi-K2 / K2.5 (kimi-k2.5.md §3): MLA
// with q/kv LoRA, interleaved YaRN RoPE on the rope dims, first dense layers,
// then MoE layers with noaux_tc routing and shared experts.
#include "core/error.h"
#include "model/decoder_model.h"

namespace mx {

namespace {

class DeepseekV3 : public DecoderModel {
 public:
  DeepseekV3(ModelConfig config, const LoadOptions& options, std::unique_ptr<TensorSource> source)
      : DecoderModel(std::move(config), options, std::move(source)) {
    const ModelConfig& c = config_;
    if (c.kv_lora_rank <= 0 || c.qk_rope_head_dim <= 0 || c.qk_nope_head_dim <= 0 || c.v_head_dim <= 0)
      fail_input("deepseek_v3 config needs kv_lora_rank, qk_nope/rope_head_dim and v_head_dim");
    rope_ = make_rope_table(c.rope_scaling, c.rope_theta, c.qk_rope_head_dim, c.max_position_embeddings,
                            RopeTable::Style::Interleaved);
    load_layers([&](int64_t i, const std::string& p, DecoderLayer& l) {
      l.attention = std::make_unique<MlaAttention>(*loader_, c, p + ".self_attn", rope_, options_.shard);
      if (c.is_moe_layer(i))
        l.ffn = std::make_unique<Moe>(*loader_, c, p + ".mlp", options_.shard);
      else
        l.ffn = std::make_unique<SwiGluMlp>(*loader_, p + ".mlp", options_.shard);
    });
  }

 protected:
  std::string family_name() const override { return "DeepseekV3"; }
};

}  // namespace

std::unique_ptr<CausalLM> make_deepseek_v3(ModelConfig config, const LoadOptions& options,
                                           std::unique_ptr<TensorSource> source) {
  return std::make_unique<DeepseekV3>(std::move(config), options, std::move(source));
}

}  // namespace mx
