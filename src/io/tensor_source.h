// Named tensors from a checkpoint: safetensors (single file or sharded with
// model.safetensors.index.json) or GGUF. Tensors are mmap-backed views in the
// dtype the file stores; conversion happens in quant/ when weights are built.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mx {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // Throws mx::Error naming the tensor (and the file it was expected in).
  virtual Tensor get(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // Human-readable origin for messages ("/path/model-00001-of-00002.safetensors").
  virtual std::string file_of(const std::string& name) const = 0;
  // Rows [begin, end) (the first dimension) / columns [begin, end) (the second
  // of a 2-D tensor) of get(name), for a tensor-parallel rank that keeps only
  // its slice. These defaults read the whole tensor (a view for rows, a copy
  // for columns); a source that makes its tensors (--load-format dummy)
  // overrides them to make only the slice. Throw InvalidArgument out of range.
  virtual Tensor get_rows(const std::string& name, int64_t begin, int64_t end) const;
  // The shape get(name) would have (default: get(name).shape()).
  virtual Shape shape_of(const std::string& name) const { return get(name).shape(); }
  virtual Tensor get_cols(const std::string& name, int64_t begin, int64_t end) const;
};

// A directory holding model.safetensors or model.safetensors.index.json + shards.
// Validates every header up front (offsets in bounds, dtype x shape == bytes,
// no overlaps); a bad file raises mx::Error naming the file and tensor.
std::unique_ptr<TensorSource> open_safetensors(const std::filesystem::path& dir_or_file);

}  // namespace mx
