// An in-process communicator group: N ranks as N threads of one process,
// exchanging host tensors through shared memory. It runs tensor/expert
// parallelism on the CPU backend (CI proves TP/EP parity with it, no GPU
// needed) and is the reference the NCCL communicator is compared with.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace mx {

class LocalGroup {
 public:
  explicit LocalGroup(int world_size);
  int world_size() const { return world_; }
  // The communicator of one rank; it keeps the group alive.
  static std::vector<std::unique_ptr<Communicator>> make(int world_size);

  // Implementation, used by LocalGroup's communicators.
  void post(int rank, Tensor* x, const Tensor* cx);
  Tensor* posted(int rank) const { return slots_[size_t(rank)]; }
  const Tensor* posted_const(int rank) const { return cslots_[size_t(rank)]; }
  // Blocks until every rank arrived; throws mx::Error once the group aborted.
  void barrier();
  void abort(const std::string& why);

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string why_;
  std::vector<Tensor*> slots_;
  std::vector<const Tensor*> cslots_;
};

}  // namespace mx
