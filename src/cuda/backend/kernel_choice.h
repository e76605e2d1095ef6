// CLI-forced MXFP4 kernel choices (--mxfp4-gemm-kernel, --moe-kernel) and the
// rule that applies them: a forced kernel runs every call whose shape it
// takes; a call it refuses (the kernel's own checks, e.g. the direct MoE path
// above 64 pairs or kernel 6 above 8 tokens) runs the shape's auto choice,
// with a warning for the first refused shape (later ones at debug level). The
// kernels' constraints stay in their own code (src/cuda), not repeated here.
#pragma once
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace mx::cuda {

// The flags' names and their numbers: ops/kernel_names.h.

// Shapes a forced choice refused, so each is tried (and warned about) once.
class RefusedShapes {
 public:
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  bool refused(const Key& key) const;
  // Records the refusal; returns true the first time for this key.
  bool add(const Key& key);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::set<Key> keys_;
};

}  // namespace mx::cuda
