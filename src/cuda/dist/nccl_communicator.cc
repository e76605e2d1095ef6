#include "cuda/dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "core/log.h"

namespace mx::cuda {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("NCCL communicator: {}: {}", what, cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail("NCCL: {}: {}", what, ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::U8: return ncclUint8;
    default: fail("NCCL: no collective type for {}", dtype_name(t));
  }
}

// NVLink multicast must stay off on the lent machines.
void keep_nvls_off() {
  if (std::getenv("NCCL_NVLS_ENABLE") == nullptr) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    log::info("NCCL_NVLS_ENABLE was unset: set to 0 (NVLink multicast stays off)");
  }
}

// Shared by the ranks' communicators so the NCCL comms are destroyed once.
struct NcclGroup {
  std::vector<ncclComm_t> comms;
  std::atomic<bool> aborted{false};
  std::mutex abort_mu;
  ~NcclGroup() {
    if (!aborted)
      for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
};

// One rank. With the Ops backend's stream given (set_device_stream), an
// all-reduce of a device tensor is enqueued on it: ordered after the kernels
// that made the input and before those that read the result, no host wait
// (so it can be captured into a step graph). Otherwise collectives run on a
// stream of their own: the device is synchronized before (the input is
// complete) and the stream after (the result is) each call. Host-resident
// tensors (a backend that keeps activations on the host) are staged through a
// device buffer.
class NcclCommunicator : public Communicator {
 public:
  // rank: global; local: index of its comm in the group (the same in one process).
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int rank, int local, int world, int device)
      : group_(std::move(group)), rank_(rank), local_(local), world_(world), device_(device) {}
  ~NcclCommunicator() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (staging_) cudaFree(staging_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void set_device_stream(void* stream) override { device_stream_ = static_cast<cudaStream_t>(stream); }

  void all_reduce_sum(Tensor& x) override {
    if (device_stream_ && x.device() == Device::CUDA) {
      check_nccl(ncclAllReduce(x.raw(), x.raw(), size_t(x.numel()), nccl_type(x.dtype()), ncclSum, comm(),
                               device_stream_),
                 "all_reduce");
      return;
    }
    void* d = device_view(x, 0);
    check_nccl(ncclAllReduce(d, d, size_t(x.numel()), nccl_type(x.dtype()), ncclSum, comm(), stream_), "all_reduce");
    finish(x, d, 0);
  }

  Tensor all_gather(const Tensor& x) override {
    Shape shape = x.shape();
    MX_CHECK(!shape.empty(), "all_gather of a scalar");
    shape[0] *= world_size();
    Tensor out = like(x, shape);
    void* in = device_view(x, 0);
    void* o = device_view(out, x.nbytes());
    check_nccl(ncclAllGather(in, o, size_t(x.numel()), nccl_type(x.dtype()), comm(), stream_), "all_gather");
    finish(out, o, x.nbytes());
    return out;
  }

  Tensor reduce_scatter(const Tensor& x) override {
    Shape shape = x.shape();
    MX_CHECK(!shape.empty() && shape[0] % world_size() == 0, "reduce_scatter: {} over {} ranks", x.describe(),
             world_size());
    shape[0] /= world_size();
    Tensor out = like(x, shape);
    void* in = device_view(x, 0);
    void* o = device_view(out, x.nbytes());
    check_nccl(ncclReduceScatter(in, o, size_t(out.numel()), nccl_type(x.dtype()), ncclSum, comm(), stream_),
               "reduce_scatter");
    finish(out, o, x.nbytes());
    return out;
  }

  // Peers blocked inside NCCL return with an error instead of waiting.
  void abort(const std::string& why) override {
    std::lock_guard lock(group_->abort_mu);
    if (group_->aborted.exchange(true)) return;
    log::error("aborting NCCL communicators: {}", why);
    for (ncclComm_t c : group_->comms) ncclCommAbort(c);
  }

 private:
  ncclComm_t comm() {
    if (group_->aborted) fail("NCCL communicators were aborted after a rank failed");
    if (!stream_) {
      check_cuda(cudaSetDevice(device_), "cudaSetDevice");
      check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    return group_->comms[size_t(local_)];
  }
  static Tensor like(const Tensor& x, Shape shape) {
    if (x.device() == Device::CUDA) fail("NCCL all_gather/reduce_scatter of device tensors need the backend's "
                                         "allocator (not wired yet; all_reduce_sum works in place)");
    return Tensor::empty(x.dtype(), std::move(shape));
  }
  // x's device address: itself when device-resident, else a staging copy at
  // `offset` bytes into this rank's staging buffer.
  void* device_view(const Tensor& x, size_t offset) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaDeviceSynchronize(), "waiting for the inputs");
    comm();
    if (x.device() == Device::CUDA) return x.raw();
    reserve(offset + x.nbytes() * size_t(world_size()));
    char* d = static_cast<char*>(staging_) + offset;
    check_cuda(cudaMemcpyAsync(d, x.raw(), x.nbytes(), cudaMemcpyHostToDevice, stream_), "staging upload");
    return d;
  }
  void finish(Tensor& x, void* d, size_t) {
    if (x.device() != Device::CUDA)
      check_cuda(cudaMemcpyAsync(x.raw(), d, x.nbytes(), cudaMemcpyDeviceToHost, stream_), "staging download");
    check_cuda(cudaStreamSynchronize(stream_), "NCCL collective");
  }
  void reserve(size_t bytes) {
    if (bytes <= staging_bytes_) return;
    if (staging_) cudaFree(staging_);
    staging_ = nullptr;
    check_cuda(cudaMalloc(&staging_, bytes), "staging buffer");
    staging_bytes_ = bytes;
  }

  std::shared_ptr<NcclGroup> group_;
  int rank_, local_, world_, device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t device_stream_ = nullptr;  // the backend's (not owned)
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world_size, int first_device) {
  if (world_size < 1) fail_input("NCCL: {} ranks", world_size);
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (first_device + world_size > devices)
    fail_input("tensor parallel size {} from GPU {} needs {} GPUs; this machine has {}", world_size, first_device,
               first_device + world_size, devices);
  keep_nvls_off();
  auto group = std::make_shared<NcclGroup>();
  group->comms.resize(size_t(world_size));
  std::vector<int> devlist(static_cast<size_t>(world_size));
  std::iota(devlist.begin(), devlist.end(), first_device);
  check_nccl(ncclCommInitAll(group->comms.data(), world_size, devlist.data()), "ncclCommInitAll");
  int version = 0;
  ncclGetVersion(&version);
  log::info("NCCL {} communicators on GPUs {}..{}", version, first_device, first_device + world_size - 1);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < world_size; ++r)
    ranks.push_back(std::make_unique<NcclCommunicator>(group, r, r, world_size, first_device + r));
  return ranks;
}

std::string make_nccl_group_id() {
  keep_nvls_off();  // before NCCL first reads its environment
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof(id.internal));
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators_for(const RankPlacement& p) {
  ncclUniqueId id;
  if (p.group_id.size() != sizeof(id.internal))
    fail("NCCL: the group id from node 0 has {} bytes, expected {}", p.group_id.size(), sizeof(id.internal));
  std::memcpy(id.internal, p.group_id.data(), sizeof(id.internal));
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (p.first_device + p.local_ranks > devices)
    fail_input("{} ranks per node from GPU {} need {} GPUs; this machine has {}", p.local_ranks, p.first_device,
               p.first_device + p.local_ranks, devices);
  keep_nvls_off();
  auto group = std::make_shared<NcclGroup>();
  group->comms.resize(size_t(p.local_ranks));
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < p.local_ranks; ++i) {
    check_cuda(cudaSetDevice(p.first_device + i), "cudaSetDevice");
    check_nccl(ncclCommInitRank(&group->comms[size_t(i)], p.world_size, id, p.first_rank + i), "ncclCommInitRank");
  }
  check_nccl(ncclGroupEnd(), "ncclCommInitRank (group)");
  log::info("NCCL communicators for ranks {}..{} of {} on GPUs {}..{}", p.first_rank,
            p.first_rank + p.local_ranks - 1, p.world_size, p.first_device, p.first_device + p.local_ranks - 1);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int i = 0; i < p.local_ranks; ++i)
    ranks.push_back(std::make_unique<NcclCommunicator>(group, p.first_rank + i, i, p.world_size, p.first_device + i));
  return ranks;
}

namespace {
// Linked whenever the single-process factory is (src/cli/nccl_comm.cc uses it).
const bool registered_multinode = [] {
  register_multinode_communicator_factory("cuda", &make_nccl_communicators_for, &make_nccl_group_id);
  return true;
}();
}  // namespace

}  // namespace mx::cuda
