// Llama family: GQA attention with neox RoPE (plain, linear or llama3
// scaling), SwiGLU MLP, tied or untied embeddings.
#include "core/error.h"
#include "model/decoder_model.h"

namespace mx {

namespace {

class Llama : public DecoderModel {
 public:
  Llama(ModelConfig config, const LoadOptions& options, std::unique_ptr<TensorSource> source)
      : DecoderModel(std::move(config), options, std::move(source)) {
    const ModelConfig& c = config_;
    const int64_t head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_size / std::max<int64_t>(c.num_heads, 1);
    rope_ = make_rope_table(c.rope_scaling, c.rope_theta, head_dim, c.max_position_embeddings,
                            RopeTable::Style::Neox);
    load_layers([&](int64_t, const std::string& p, DecoderLayer& l) {
      l.attention = std::make_unique<GqaAttention>(*loader_, c, p + ".self_attn", rope_, options_.shard);
      l.ffn = std::make_unique<SwiGluMlp>(*loader_, p + ".mlp", options_.shard);
    });
  }

 protected:
  std::string family_name() const override { return "Llama"; }
};

}  // namespace

std::unique_ptr<CausalLM> make_llama(ModelConfig config, const LoadOptions& options,
                                     std::unique_ptr<TensorSource> source) {
  return std::make_unique<Llama>(std::move(config), options, std::move(source));
}

}  // namespace mx
