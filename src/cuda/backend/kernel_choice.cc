#include "cuda/backend/kernel_choice.h"

#include "core/error.h"

namespace mx::cuda {

bool RefusedShapes::refused(const Key& key) const {
  std::lock_guard lock(mutex_);
  return keys_.count(key) != 0;
}

bool RefusedShapes::add(const Key& key) {
  std::lock_guard lock(mutex_);
  return keys_.insert(key).second;
}

size_t RefusedShapes::size() const {
  std::lock_guard lock(mutex_);
  return keys_.size();
}

}  // namespace mx::cuda
