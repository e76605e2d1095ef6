#include "io/tensor_source.h"

#include <cstring>

#include "core/error.h"

namespace mx {

Tensor TensorSource::get_rows(const std::string& name, int64_t begin, int64_t end) const {
  Tensor t = get(name);
  if (t.ndim() < 1 || begin < 0 || begin > end || end > t.dim(0))
    fail_input("{}: rows [{}, {}) of {} are out of range", name, begin, end, t.describe());
  return t.slice_rows(begin, end);
}

Tensor TensorSource::get_cols(const std::string& name, int64_t begin, int64_t end) const {
  Tensor t = get(name);
  if (t.ndim() != 2 || begin < 0 || begin > end || end > t.dim(1))
    fail_input("{}: columns [{}, {}) of {} are out of range (2-D tensors only)", name, begin, end, t.describe());
  const size_t elem = dtype_size(t.dtype()), row_in = size_t(t.dim(1)) * elem, row_out = size_t(end - begin) * elem;
  Tensor out = Tensor::empty(t.dtype(), {t.dim(0), end - begin});
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(out.raw() + size_t(r) * row_out, t.raw() + size_t(r) * row_in + size_t(begin) * elem, row_out);
  return out;
}

}  // namespace mx
