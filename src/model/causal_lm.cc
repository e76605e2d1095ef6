// load_causal_lm: config.json (or a GGUF file's metadata) picks the family;
// the weights come from the directory's safetensors or the GGUF file.
#include "model/causal_lm.h"

#include "core/error.h"
#include "core/log.h"
#include "io/gguf.h"
#include "io/gguf_source.h"
#include "model/decoder_model.h"

namespace mx {

std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options) {
  const bool gguf = is_gguf_file(model_dir);
  ModelConfig config = gguf ? load_gguf_model_config(model_dir) : load_model_config(model_dir);
  auto source = gguf ? open_gguf(model_dir) : open_safetensors(model_dir);
  std::unique_ptr<CausalLM> model;
  switch (config.arch) {
    case Arch::Llama: model = make_llama(std::move(config), options, std::move(source)); break;
    case Arch::DeepseekV3: model = make_deepseek_v3(std::move(config), options, std::move(source)); break;
  }
  if (!model) fail("{}: unsupported architecture", model_dir.string());
  log::info("loaded {}", model->describe());
  return model;
}

}  // namespace mx
