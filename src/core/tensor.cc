#include "core/tensor.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace mx {

HeapStorage::HeapStorage(size_t bytes) : bytes_(new uint8_t[bytes ? bytes : 1]()), size_(bytes) {}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset, DType dtype, Shape shape)
    : storage_(std::move(storage)), offset_(offset), dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) MX_CHECK(d >= 0, "negative dimension in {}", shape_str(shape_));
  MX_CHECK(offset_ + nbytes() <= storage_->size(), "tensor {} at offset {} exceeds storage of {} bytes",
           describe(), offset_, storage_->size());
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  return Tensor(std::make_shared<HeapStorage>(bytes), 0, dtype, std::move(shape));
}

Tensor Tensor::from_f32(const std::vector<float>& v, Shape shape) {
  MX_CHECK(int64_t(v.size()) == shape_numel(shape), "{} values for shape {}", v.size(), shape_str(shape));
  Tensor t = empty(DType::F32, std::move(shape));
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  if (i < 0) i += n;
  MX_CHECK(i >= 0 && i < n, "dim {} of {}", i, describe());
  return shape_[size_t(i)];
}

size_t Tensor::nbytes() const { return size_t(numel()) * dtype_size(dtype_); }

Tensor Tensor::reshape(Shape shape) const {
  MX_CHECK(shape_numel(shape) == numel(), "cannot reshape {} to {}", describe(), shape_str(shape));
  return Tensor(storage_, offset_, dtype_, std::move(shape));
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  MX_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "rows [{}, {}) of {}", begin, end,
           describe());
  Shape s = shape_;
  s[0] = end - begin;
  size_t row_bytes = shape_[0] ? nbytes() / size_t(shape_[0]) : 0;
  return Tensor(storage_, offset_ + size_t(begin) * row_bytes, dtype_, std::move(s));
}

Tensor Tensor::copy_cols(int64_t begin, int64_t end) const {
  MX_CHECK(ndim() == 2 && begin >= 0 && begin <= end && end <= shape_[1] && device() == Device::CPU,
           "columns [{}, {}) of {}", begin, end, describe());
  const size_t elem = dtype_size(dtype_), row_in = size_t(shape_[1]) * elem, row_out = size_t(end - begin) * elem;
  Tensor out = empty(dtype_, {shape_[0], end - begin});
  for (int64_t r = 0; r < shape_[0]; ++r)
    std::memcpy(out.raw() + size_t(r) * row_out, raw() + size_t(r) * row_in + size_t(begin) * elem, row_out);
  return out;
}

Tensor Tensor::clone() const {
  MX_CHECK(device() == Device::CPU, "clone of a device tensor");
  Tensor t = empty(dtype_, shape_);
  std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

float Tensor::get_f32(int64_t i) const {
  MX_CHECK(device() == Device::CPU, "get_f32 of a device tensor {}", describe());
  const uint8_t* p = raw();
  switch (dtype_) {
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F64: return float(reinterpret_cast<const double*>(p)[i]);
    case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::F16: return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::F8E4M3: return fp8e4m3_to_f32(p[i]);
    case DType::F8E5M2: return fp8e5m2_to_f32(p[i]);
    case DType::E8M0: return e8m0_to_f32(p[i]);
    case DType::I32: return float(reinterpret_cast<const int32_t*>(p)[i]);
    case DType::I64: return float(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::U8: return float(p[i]);
    default: fail("get_f32 on {}", describe());
  }
}

void Tensor::set_f32(int64_t i, float v) {
  MX_CHECK(device() == Device::CPU, "set_f32 of a device tensor {}", describe());
  uint8_t* p = raw();
  switch (dtype_) {
    case DType::F32: reinterpret_cast<float*>(p)[i] = v; return;
    case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::BF16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    case DType::F8E4M3: p[i] = f32_to_fp8e4m3(v); return;
    default: fail("set_f32 on {}", describe());
  }
}

std::vector<float> Tensor::to_f32_vector() const {
  MX_CHECK(device() == Device::CPU, "to_f32_vector of a device tensor {}", describe());
  std::vector<float> out(static_cast<size_t>(numel()));
  if (dtype_ == DType::F32) {
    std::memcpy(out.data(), raw(), nbytes());
    return out;
  }
  for (int64_t i = 0; i < numel(); ++i) out[size_t(i)] = get_f32(i);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor t = empty(dtype, shape_);
  for (int64_t i = 0; i < numel(); ++i) t.set_f32(i, get_f32(i));
  return t;
}

std::string Tensor::describe() const { return fmt::format("{}{}", dtype_name(dtype_), shape_str(shape_)); }

}  // namespace mx
