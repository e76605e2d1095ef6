// A read-only memory mapping of a whole file, usable as Tensor storage: every
// tensor view of a checkpoint holds a shared_ptr to it, so the mapping lives
// exactly as long as some weight still points into it.
#pragma once
#include <filesystem>
#include <string>

#include "core/tensor.h"

namespace mx {

class MappedFile : public Storage {
 public:
  // Throws mx::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile() override;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() override { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const override { return size_; }
  // Mapped PROT_READ: writing through a view would fault, so say so.
  bool writable() const override { return false; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mx
