// mxserve inspect: what a checkpoint directory holds, as the loader sees it:
// the normalized config, the quantization spec, and per-format counts.
#include <fmt/format.h>

#include "cli/command.h"
#include "io/model_config.h"
#include "io/tensor_source.h"
#include "quant/weight_loader.h"

namespace {

void print_config(const mx::ModelConfig& c) {
  fmt::print("model_type: {} ({})\n", c.model_type, c.arch == mx::Arch::Llama ? "llama" : "deepseek_v3");
  if (!c.tensor_prefix.empty()) fmt::print("tensor prefix: {}\n", c.tensor_prefix);
  fmt::print("layers: {}, hidden: {}, heads: {} (kv {}), vocab: {}, intermediate: {}\n", c.num_layers, c.hidden_size,
             c.num_heads, c.num_kv_heads, c.vocab_size, c.intermediate_size);
  if (c.arch == mx::Arch::DeepseekV3) {
    fmt::print("MLA: q_lora {}, kv_lora {}, nope {}, rope {}, v {}\n", c.q_lora_rank, c.kv_lora_rank,
               c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim);
    fmt::print("MoE: {} routed experts (top {}), {} shared, intermediate {}, first {} layers dense, groups {}/{}\n",
               c.n_routed_experts, c.num_experts_per_tok, c.n_shared_experts, c.moe_intermediate_size,
               c.first_k_dense_replace, c.topk_group, c.n_group);
  }
  fmt::print("rope: theta {}, scaling {}{}\n", c.rope_theta, c.rope_scaling.type.empty() ? "none" : c.rope_scaling.type,
             c.rope_scaling.type.empty() ? "" : fmt::format(" (factor {})", c.rope_scaling.factor));
}

mx::cli::Register reg([](CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "Print a checkpoint's config summary and per-format tensor counts");
  cmd->add_option("--model", *dir, "checkpoint directory (config.json + safetensors)")->required();
  cmd->callback([dir] {
    mx::ModelConfig config = mx::load_model_config(*dir);
    auto source = mx::open_safetensors(*dir);
    print_config(config);
    mx::WeightLoader loader(config, *source);
    fmt::print("tensors: {}\n{}", source->names().size(), loader.summary());
  });
});

}  // namespace
