// load_causal_lm: config.json (or a GGUF file's metadata) picks the family;
// the weights come from the directory's safetensors or the GGUF file.
#include "model/causal_lm.h"

#include "core/error.h"
#include "core/log.h"
#include "io/gguf.h"
#include "io/gguf_source.h"
#include "model/decoder_model.h"
#include "model/parallel_causal_lm.h"
#include "quant/dummy_source.h"

namespace mx {

std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options) {
  // -tp N: N rank models, each loaded by this function with its ShardSpec.
  if (options.tensor_parallel_size > 1 && !options.shard.sharded()) return load_parallel_causal_lm(model_dir, options);
  if (options.load_format != "auto" && options.load_format != "dummy")
    fail_input("--load-format '{}': expected auto or dummy", options.load_format);
  const bool gguf = is_gguf_file(model_dir);
  if (gguf && options.load_format == "dummy") fail_input("--load-format dummy needs a config.json, not a GGUF file");
  ModelConfig config = gguf ? load_gguf_model_config(model_dir) : load_model_config(model_dir);
  std::unique_ptr<TensorSource> source;
  if (options.load_format == "dummy") source = std::make_unique<DummyTensorSource>(config, options.dummy_seed);
  else source = gguf ? open_gguf(model_dir) : open_safetensors(model_dir);
  std::unique_ptr<CausalLM> model;
  switch (config.arch) {
    case Arch::Llama: model = make_llama(std::move(config), options, std::move(source)); break;
    case Arch::DeepseekV3: model = make_deepseek_v3(std::move(config), options, std::move(source)); break;
  }
  if (!model) fail("{}: unsupported architecture", model_dir.string());
  if (!options.shard.sharded()) log::info("loaded {}", model->describe());
  return model;
}

}  // namespace mx
