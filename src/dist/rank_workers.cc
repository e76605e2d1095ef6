#include "dist/rank_workers.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace mx {

namespace {
std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace

RankWorkers::RankWorkers(int world_size, std::function<void(const std::string&)> on_failure)
    : on_failure_(std::move(on_failure)), errors_(size_t(std::max(world_size, 1))) {
  if (world_size < 1) fail_input("a parallel group needs at least 1 rank, got {}", world_size);
  for (int r = 0; r < world_size; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankWorkers::~RankWorkers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void RankWorkers::loop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* job = job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      lock.lock();
      errors_[size_t(rank)] = error;
      failure_order_.push_back(rank);
      const bool first = failure_order_.size() == 1;
      lock.unlock();
      // A failed rank may leave its peers blocked in a collective: wake them
      // before this rank counts as done.
      if (first && on_failure_) on_failure_(fmt::format("rank {} failed: {}", rank, describe(error)));
    }
    lock.lock();
    if (--pending_ == 0) done_.notify_all();
  }
}

void RankWorkers::run(const std::function<void(int)>& job) {
  if (failed()) fail("parallel group stopped earlier ({}); restart the server", failure_);
  {
    std::lock_guard lock(mu_);
    job_ = &job;
    pending_ = world_size();
    for (auto& e : errors_) e = nullptr;
    failure_order_.clear();
    ++generation_;
  }
  wake_.notify_all();
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (failure_order_.empty()) return;
  const int rank = failure_order_.front();
  std::exception_ptr error = errors_[size_t(rank)];
  lock.unlock();
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument& e) {
    failure_ = fmt::format("rank {}: {}", rank, e.what());
    failure_is_input_ = true;
  } catch (const std::exception& e) {
    failure_ = fmt::format("rank {}: {}", rank, e.what());
  } catch (...) {
    failure_ = fmt::format("rank {}: unknown exception", rank);
  }
  log::error("parallel group: {}", failure_);
  if (failure_is_input_) throw InvalidArgument(failure_);
  throw Error(failure_);
}

}  // namespace mx
