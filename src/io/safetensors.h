// The safetensors format: an 8-byte little-endian header length N, N bytes of
// JSON {name: {dtype, shape, data_offsets:[begin,end]}, "__metadata__": {...}},
// then the data section. Readers map the file and hand out views; every
// header is validated before any tensor is touched, so a corrupt or
// truncated file is an mx::InvalidArgument naming the file and the tensor,
// never a read past the mapping.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/mapped_file.h"

namespace mx {

// Largest JSON header accepted (the reference implementation's limit too):
// beyond it the length field is almost certainly garbage.
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

struct SafetensorsEntry {
  DType dtype = DType::F32;
  Shape shape;          // as the Tensor sees it (F4 halves the last dimension)
  size_t begin = 0;     // absolute byte offsets in the file
  size_t end = 0;
};

// Parses and validates a header held in memory (`bytes` is the whole file).
// Checks: length field within the file and below kMaxSafetensorsHeader, JSON
// well formed and an object, each entry's dtype known, shape non-negative
// integers, data_offsets within the data section, byte size equal to
// dtype x shape, and no two tensors overlapping. "__metadata__" is ignored.
std::map<std::string, SafetensorsEntry> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                                 const std::string& origin);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::string& path() const { return file_->path(); }
  bool has(const std::string& name) const { return entries_.count(name) > 0; }
  Tensor get(const std::string& name) const;
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsEntry> entries_;
};

}  // namespace mx
