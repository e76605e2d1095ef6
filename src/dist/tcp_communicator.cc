#include "dist/tcp_communicator.h"

#include <cstring>
#include <mutex>

#include "dist/wire.h"

namespace mx {

namespace {

enum Op : uint32_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3 };
constexpr uint32_t kResult = 0x100;  // rank 0's answer to op: op | kResult

const char* op_name(uint32_t op) {
  return op == kAllReduce ? "all_reduce_sum" : op == kAllGather ? "all_gather" : "reduce_scatter";
}

std::string tensor_header(const Tensor& x) {
  wire::Writer w;
  w.pod(uint8_t(x.dtype()));
  w.vec(std::vector<int64_t>(x.shape().begin(), x.shape().end()));
  return w.take();
}

// A tensor as sent: its header, then its bytes.
Tensor decode_tensor(const std::string& payload, const std::string& from) {
  wire::Reader r(payload, "tensor message");
  const auto dtype = DType(r.pod<uint8_t>());
  const auto dims = r.vec<int64_t>();
  const size_t header = 1 + 8 + dims.size() * 8;
  Tensor t = Tensor::empty(dtype, Shape(dims.begin(), dims.end()));
  if (payload.size() != header + t.nbytes())
    fail("{} sent {} bytes for a {} tensor of {} bytes", from, payload.size() - header, t.describe(), t.nbytes());
  std::memcpy(t.raw(), payload.data() + header, t.nbytes());
  return t;
}

class TcpCommunicator : public Communicator {
 public:
  TcpCommunicator(int rank, int world, std::vector<std::unique_ptr<TcpChannel>> peers)
      : rank_(rank), world_(world), peers_(std::move(peers)) {
    const size_t expected = rank == 0 ? size_t(world) : 1;
    if (world < 1 || rank < 0 || rank >= world || peers_.size() != expected)
      fail("tcp communicator: rank {} of {} given {} channels (expected {})", rank, world, peers_.size(), expected);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce_sum(Tensor& x) override {
    Tensor sum = collective(kAllReduce, x);
    std::memcpy(x.raw(), sum.raw(), x.nbytes());
  }
  Tensor all_gather(const Tensor& x) override { return collective(kAllGather, x); }
  Tensor reduce_scatter(const Tensor& x) override { return collective(kReduceScatter, x); }

  void abort(const std::string& why) override {
    {
      std::lock_guard lock(mu_);
      if (aborted_) return;
      aborted_ = true;
      why_ = why;
    }
    for (auto& p : peers_)
      if (p) p->shutdown();
  }

 private:
  Tensor collective(uint32_t op, const Tensor& x) {
    check_usable(op, x);
    try {
      if (rank_ != 0) {
        peers_[0]->send(op, tensor_header(x), x.raw(), x.nbytes());
        return decode_tensor(peers_[0]->receive_expect(op | kResult, op_name(op)), peers_[0]->peer());
      }
      return lead(op, x);
    } catch (const ChannelClosed& e) {
      std::lock_guard lock(mu_);
      if (aborted_) throw ChannelClosed(fmt::format("parallel group stopped: {}", why_));
      throw ChannelClosed(fmt::format("{}: {}", op_name(op), e.what()));
    }
  }

  void check_usable(uint32_t op, const Tensor& x) {
    {
      std::lock_guard lock(mu_);
      if (aborted_) throw ChannelClosed(fmt::format("parallel group stopped: {}", why_));
    }
    if (x.device() != Device::CPU || x.ndim() < 1)
      fail("{}: {} (the tcp communicator exchanges host tensors with rows)", op_name(op), x.describe());
  }

  // Rank 0: every rank's input, in rank order; the results; each rank's share.
  Tensor lead(uint32_t op, const Tensor& mine) {
    std::vector<Tensor> inputs{mine};
    std::string error;
    for (int r = 1; r < world_; ++r) {
      Frame f = peers_[size_t(r)]->receive();
      if (f.tag != op) {
        error = fmt::format("{}: rank {} called {} while rank 0 called it (every rank must call collectives alike)",
                            op_name(op), r, f.tag < kResult && f.tag >= kAllReduce ? op_name(f.tag) : "something else");
        inputs.push_back(Tensor());
        continue;
      }
      inputs.push_back(decode_tensor(f.payload, peers_[size_t(r)]->peer()));
    }
    if (error.empty()) error = check_inputs(op, inputs);
    if (!error.empty()) {
      for (int r = 1; r < world_; ++r) peers_[size_t(r)]->send(TcpChannel::kErrorTag, error);
      fail("{}", error);
    }
    if (op == kAllGather) {
      Tensor out = gather(inputs);
      for (int r = 1; r < world_; ++r) send_result(op, r, out);
      return out;
    }
    Tensor sum = sum_in_rank_order(inputs);
    if (op == kAllReduce) {
      for (int r = 1; r < world_; ++r) send_result(op, r, sum);
      return sum;
    }
    const int64_t rows = sum.dim(0) / world_;
    for (int r = 1; r < world_; ++r) send_result(op, r, sum.slice_rows(r * rows, (r + 1) * rows));
    return sum.slice_rows(0, rows).clone();
  }

  // The same checks LocalGroup makes, so both refuse the same calls.
  std::string check_inputs(uint32_t op, const std::vector<Tensor>& inputs) const {
    const Tensor& first = inputs[0];
    for (int r = 0; r < world_; ++r) {
      const Tensor& t = inputs[size_t(r)];
      if (t.shape() != first.shape() || t.dtype() != first.dtype())
        return fmt::format("{}: rank {} passed {} but rank 0 passed {} (every rank must call collectives alike)",
                           op_name(op), r, t.describe(), first.describe());
    }
    if (op != kAllGather && first.dtype() != DType::F32)
      return fmt::format("{}: {} (the tcp communicator sums F32 tensors)", op_name(op), first.describe());
    if (op == kReduceScatter && first.dim(0) % world_ != 0)
      return fmt::format("reduce_scatter: {} rows do not split over {} ranks", first.dim(0), world_);
    return {};
  }

  Tensor sum_in_rank_order(const std::vector<Tensor>& inputs) const {
    Tensor sum = Tensor::zeros(DType::F32, inputs[0].shape());
    float* dst = sum.data<float>();
    const int64_t n = sum.numel();
    for (const Tensor& t : inputs) {
      const float* src = t.data<float>();
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    return sum;
  }

  Tensor gather(const std::vector<Tensor>& inputs) const {
    Shape shape = inputs[0].shape();
    shape[0] *= world_;
    Tensor out = Tensor::empty(inputs[0].dtype(), shape);
    const size_t each = inputs[0].nbytes();
    for (int r = 0; r < world_; ++r) std::memcpy(out.raw() + size_t(r) * each, inputs[size_t(r)].raw(), each);
    return out;
  }

  void send_result(uint32_t op, int r, const Tensor& t) {
    peers_[size_t(r)]->send(op | kResult, tensor_header(t), t.raw(), t.nbytes());
  }

  int rank_, world_;
  std::vector<std::unique_ptr<TcpChannel>> peers_;
  std::mutex mu_;
  bool aborted_ = false;
  std::string why_;
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_communicator(int rank, int world_size,
                                                    std::vector<std::unique_ptr<TcpChannel>> peers) {
  return std::make_unique<TcpCommunicator>(rank, world_size, std::move(peers));
}

std::vector<std::unique_ptr<Communicator>> make_tcp_group_in_process(int world_size) {
  if (world_size < 1) fail_input("a communicator group needs at least 1 rank, got {}", world_size);
  std::vector<std::unique_ptr<TcpChannel>> root(static_cast<size_t>(world_size));
  std::vector<std::unique_ptr<Communicator>> ranks(static_cast<size_t>(world_size));
  for (int r = 1; r < world_size; ++r) {
    auto [at_root, at_rank] = channel_pair("rank 0", fmt::format("rank {}", r));
    root[size_t(r)] = std::move(at_root);
    std::vector<std::unique_ptr<TcpChannel>> one;
    one.push_back(std::move(at_rank));
    ranks[size_t(r)] = make_tcp_communicator(r, world_size, std::move(one));
  }
  ranks[0] = make_tcp_communicator(0, world_size, std::move(root));
  return ranks;
}

}  // namespace mx
