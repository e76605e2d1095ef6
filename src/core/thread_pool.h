// A small fixed thread pool with a blocking parallel_for: the CPU backend
// splits rows of a matmul or heads of attention across cores with it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mx {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); blocks until done.
  // The calling thread takes a chunk too. Not reentrant; calls from several
  // threads (tensor-parallel ranks in one process) take turns.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // Process-wide pool sized by set_global_threads() (default: all cores).
  static ThreadPool& global();
  static void set_global_threads(int n);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace mx
