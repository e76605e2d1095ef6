// Writes safetensors files (synthetic checkpoints, `mxserve quantize`): one
// file, or shards plus model.safetensors.index.json. Tensors are written in
// the order given, the header padded with spaces to an 8-byte boundary so the
// data section is aligned.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace mx {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes `tensors` (CPU, contiguous) to `path`. `metadata` becomes the
// string map "__metadata__" (e.g. {"format": "pt"}). Throws mx::Error on I/O
// failure or a duplicate name.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Splits `tensors` into shards of at most `max_shard_bytes` of data each (a
// larger tensor gets a shard of its own), named model-0000i-of-0000n.safetensors,
// and writes model.safetensors.index.json beside them. Returns the shard paths.
std::vector<std::filesystem::path> write_safetensors_sharded(const std::filesystem::path& dir,
                                                             const NamedTensors& tensors, size_t max_shard_bytes);

}  // namespace mx
