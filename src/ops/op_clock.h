// A clock that times work the way the backend executes it: points recorded in
// issue order, differences read back later. A device backend records into its
// stream (the GPU's own timer, no synchronization until read); the host clock
// below serves backends that compute synchronously (the CPU backend).
// ops/profiling_ops.h uses it for --profile-ops.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

namespace mx {

class OpClock {
 public:
  virtual ~OpClock() = default;
  // Records a point after all work issued so far; returns its index.
  virtual int record() = 0;
  // Milliseconds from point a to point b (waits for b to be reached).
  virtual double elapsed_ms(int a, int b) = 0;
  // Forgets every point (indices start from 0 again).
  virtual void reset() = 0;
};

class HostOpClock : public OpClock {
 public:
  int record() override {
    points_.push_back(std::chrono::steady_clock::now());
    return int(points_.size()) - 1;
  }
  double elapsed_ms(int a, int b) override {
    return std::chrono::duration<double, std::milli>(points_.at(size_t(b)) - points_.at(size_t(a))).count();
  }
  void reset() override { points_.clear(); }

 private:
  std::vector<std::chrono::steady_clock::time_point> points_;
};

}  // namespace mx
