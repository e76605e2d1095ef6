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

#include "core/error.h"
#include "core/log.h"

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

  // Runs `forced` (a call with the forced choice) unless `key` was refused
  // before. The kernels refuse with InvalidArgument from their checks, before
  // they launch: the refusal is recorded, warned about the first time (debug
  // after) and false returned, so the caller runs the automatic choice.
  template <class Forced>
  bool run_forced(const Key& key, const char* flag, const std::string& shape, Forced&& forced) {
    if (refused(key)) return false;
    try {
      forced();
      return true;
    } catch (const InvalidArgument& e) {
      if (add(key)) {
        if (size() == 1)
          log::warn("{} does not take {} ({}): auto there (further ones it refuses are logged at debug level)", flag,
                    shape, e.what());
        else
          log::debug("{} does not take {} ({}): auto there", flag, shape, e.what());
      }
      return false;
    }
  }

 private:
  mutable std::mutex mutex_;
  std::set<Key> keys_;
};

}  // namespace mx::cuda
