#include "dist/local_group.h"

#include <cstring>

#include "core/error.h"

namespace mx {

namespace {

// One rank of a LocalGroup. Collectives post the rank's tensor, meet at a
// barrier, read the others' tensors, and meet again before anyone may reuse
// its buffer, so the exchange needs no copies into shared buffers.
class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }

  void all_reduce_sum(Tensor& x) override {
    exchange(&x, &x);
    check_inputs("all_reduce_sum", true);
    // Every rank sums in rank order, so all ranks hold bitwise the same result.
    const int64_t n = x.numel();
    std::vector<float> sum(size_t(n), 0.0f);
    for (int r = 0; r < world_size(); ++r) {
      const float* src = group_->posted(r)->data<float>();
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += src[i];
    }
    group_->barrier();  // every rank has read every input
    std::memcpy(x.data<float>(), sum.data(), size_t(n) * sizeof(float));
  }

  Tensor all_gather(const Tensor& x) override {
    exchange(nullptr, &x);
    check_inputs("all_gather", false);
    Shape shape = x.shape();
    shape[0] *= world_size();
    Tensor out = Tensor::empty(x.dtype(), shape);
    for (int r = 0; r < world_size(); ++r)
      std::memcpy(out.raw() + size_t(r) * x.nbytes(), group_->posted_const(r)->raw(), x.nbytes());
    group_->barrier();
    return out;
  }

  Tensor reduce_scatter(const Tensor& x) override {
    exchange(nullptr, &x);
    check_inputs("reduce_scatter", true);
    if (x.dim(0) % world_size() != 0) {
      group_->barrier();
      fail("reduce_scatter: {} rows do not split over {} ranks", x.dim(0), world_size());
    }
    Shape shape = x.shape();
    shape[0] /= world_size();
    Tensor out = Tensor::empty(DType::F32, shape);
    const int64_t n = out.numel(), begin = int64_t(rank_) * n;
    float* dst = out.data<float>();
    for (int r = 0; r < world_size(); ++r) {
      const float* src = group_->posted_const(r)->data<float>() + begin;
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    group_->barrier();
    return out;
  }

  void abort(const std::string& why) override { group_->abort(why); }

 private:
  void exchange(Tensor* x, const Tensor* cx) {
    group_->post(rank_, x, cx ? cx : x);
    group_->barrier();
  }
  // Every rank checks every rank's input, so all of them agree on failing;
  // they still meet once more so no rank frees its tensor while another reads it.
  void check_inputs(const char* op, bool sums) {
    const Tensor& first = *group_->posted_const(0);
    std::string error;
    for (int r = 0; r < world_size() && error.empty(); ++r) {
      const Tensor& t = *group_->posted_const(r);
      if (t.shape() != first.shape() || t.dtype() != first.dtype())
        error = fmt::format("{}: rank {} passed {} but rank 0 passed {} (every rank must call collectives alike)", op,
                            r, t.describe(), first.describe());
      else if (t.ndim() < 1 || (sums && t.dtype() != DType::F32))
        error = fmt::format("{}: {} (the in-process group needs F32 tensors with rows)", op, t.describe());
    }
    if (error.empty()) return;
    group_->barrier();
    fail("{}", error);
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int world_size)
    : world_(world_size), slots_(size_t(std::max(world_size, 0))), cslots_(size_t(std::max(world_size, 0))) {
  if (world_size < 1) fail_input("a communicator group needs at least 1 rank, got {}", world_size);
}

std::vector<std::unique_ptr<Communicator>> LocalGroup::make(int world_size) {
  auto group = std::make_shared<LocalGroup>(world_size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < world_size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

void LocalGroup::post(int rank, Tensor* x, const Tensor* cx) {
  slots_[size_t(rank)] = x;
  cslots_[size_t(rank)] = cx;
}

void LocalGroup::barrier() {
  std::unique_lock lock(mu_);
  if (aborted_) fail("parallel group stopped: {}", why_);
  const uint64_t gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return aborted_ || generation_ != gen; });
  if (generation_ == gen) fail("parallel group stopped: {}", why_);
}

void LocalGroup::abort(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    why_ = why;
  }
  cv_.notify_all();
}

}  // namespace mx
