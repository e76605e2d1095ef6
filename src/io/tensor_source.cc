#include "io/tensor_source.h"

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
  return t.copy_cols(begin, end);
}

}  // namespace mx
