// A Tensor is a typed, shaped view over a Storage. Storage is either owned
// memory or a read-only mapping of a checkpoint file (kept alive by the view).
// Tensors are contiguous row-major; views of leading-dimension ranges share
// storage. Device memory is described the same way by the CUDA backend.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace mx {

enum class Device : uint8_t { CPU, CUDA };

// Bytes somewhere; subclasses own them (heap buffer, file mapping, cudaMalloc).
class Storage {
 public:
  virtual ~Storage() = default;
  virtual uint8_t* data() = 0;
  virtual size_t size() const = 0;
  virtual Device device() const { return Device::CPU; }
  virtual bool writable() const { return true; }
};

class HeapStorage : public Storage {
 public:
  explicit HeapStorage(size_t bytes);
  uint8_t* data() override { return bytes_.get(); }
  size_t size() const override { return size_; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_;
};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, size_t offset, DType dtype, Shape shape);

  // Fresh zero-filled CPU tensor.
  static Tensor empty(DType dtype, Shape shape);
  static Tensor zeros(DType dtype, Shape shape) { return empty(dtype, std::move(shape)); }
  static Tensor from_f32(const std::vector<float>& v, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative counts from the end
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const;
  Device device() const { return storage_ ? storage_->device() : Device::CPU; }

  uint8_t* raw() const { return storage_->data() + offset_; }
  template <typename T>
  T* data() const { return reinterpret_cast<T*>(raw()); }

  // Same bytes, new shape (numel must match).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Columns [begin, end) of a 2-D host tensor, copied into a new tensor.
  Tensor copy_cols(int64_t begin, int64_t end) const;
  // Deep copy into fresh CPU memory.
  Tensor clone() const;

  // Element access through float for any float-like dtype (slow; tests and
  // reference code). Packed dtypes are not supported here.
  float get_f32(int64_t flat_index) const;
  void set_f32(int64_t flat_index, float v);
  std::vector<float> to_f32_vector() const;
  // Convert a float-like tensor to another float-like dtype (CPU).
  Tensor to(DType dtype) const;

  std::string describe() const;  // "bf16[4, 8]"
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset() const { return offset_; }

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
};

}  // namespace mx
