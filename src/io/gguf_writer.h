// Writes GGUF v3 files holding metadata only (no tensors): `mxserve quantize`
// keeps a GGUF checkpoint's tokenizer this way (tokenizer.gguf beside the
// safetensors), byte-for-byte the same keys, types and values.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "io/gguf.h"

namespace mx {

// Copies the keys of `src` for which keep(key) is true, in file order, with
// their types. Throws mx::Error on I/O failure and for arrays of arrays (no
// tokenizer key uses them; their inner element types are not kept).
void write_gguf_metadata(const std::filesystem::path& out, const GgufFile& src,
                         const std::function<bool(const std::string&)>& keep);

// The tokenizer.chat_template of a GGUF file with the BOS/EOS token strings the
// template may refer to; empty source when the file has none.
struct GgufChatTemplateSource {
  std::string source, bos_token, eos_token;
};
GgufChatTemplateSource gguf_chat_template(const GgufFile& file);

}  // namespace mx
