// One worker thread per rank of a parallel group, driven by a leader (the
// engine's loop thread): run() hands every rank the same job (the leader's
// step plan, read in place: shared memory), waits for all of them, and turns
// a rank's failure into one clear error on the leader instead of a hang.
// Each rank's work always runs on the same thread, so per-thread device state
// (the current CUDA device) set when the rank was created stays valid.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mx {

class RankWorkers {
 public:
  // on_failure(message) runs once, on the leader, when a rank first fails
  // (e.g. aborting the communicator group so peers blocked in a collective
  // return). Later run() calls throw at once with the same message.
  RankWorkers(int world_size, std::function<void(const std::string&)> on_failure);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int world_size() const { return int(threads_.size()); }
  // Runs job(rank) on every rank's thread and waits. If ranks threw, rethrows
  // the first failure (mx::InvalidArgument stays one) as "rank R: message".
  void run(const std::function<void(int rank)>& job);
  bool failed() const { return !failure_.empty(); }

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::function<void(const std::string&)> on_failure_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  // Per run: each rank's exception and the order in which ranks failed.
  std::vector<std::exception_ptr> errors_;
  std::vector<int> failure_order_;
  std::string failure_;
  bool failure_is_input_ = false;
};

}  // namespace mx
