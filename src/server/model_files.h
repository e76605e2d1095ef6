// The tokenizer and chat template that go with a model path: a .gguf file
// (its tokenizer.ggml.* metadata and tokenizer.chat_template), a directory
// `mxserve quantize` wrote from a GGUF (tokenizer.gguf beside the
// safetensors), or a Hugging Face style directory (tokenizer.json /
// tiktoken.model + tokenizer_config.json / chat_template.jinja).
#pragma once
#include <filesystem>
#include <memory>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx {

std::unique_ptr<Tokenizer> load_model_tokenizer(const std::filesystem::path& model);
// nullptr when the model has no chat template.
std::unique_ptr<ChatTemplate> load_model_chat_template(const std::filesystem::path& model);

}  // namespace mx
