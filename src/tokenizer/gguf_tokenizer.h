// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*).
#pragma once
#include <filesystem>
#include <memory>

#include "tokenizer/tokenizer.h"

namespace mx {

class GgufFile;

// Reads the tokenizer.ggml.* keys into a GgufVocab (throws InvalidArgument
// naming a missing or mistyped key).
GgufVocab read_gguf_vocab(const GgufFile& file);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf_file);

}  // namespace mx
