#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace mx {

namespace {
int g_threads = 0;  // 0 = hardware concurrency
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_pool_mu;

std::pair<int64_t, int64_t> chunk(int64_t n, int parts, int i) {
  int64_t per = n / parts, rem = n % parts;
  int64_t b = i * per + std::min<int64_t>(i, rem);
  return {b, b + per + (i < rem ? 1 : 0)};
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    auto* job = job_;
    int64_t n = job_n_;
    lock.unlock();
    auto [b, e] = chunk(n, size(), index);
    if (b < e) (*job)(b, e);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  auto [b, e] = chunk(n, size(), 0);
  if (b < e) fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) {
    int n = g_threads > 0 ? g_threads : int(std::max(1u, std::thread::hardware_concurrency()));
    g_pool = std::make_unique<ThreadPool>(n);
  }
  return *g_pool;
}

void ThreadPool::set_global_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_threads = n;
  g_pool.reset();
}

}  // namespace mx
