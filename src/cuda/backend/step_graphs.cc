#include "cuda/backend/step_graphs.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/backend/device_memory.h"

namespace mx::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kFirstArenaBytes = size_t(1) << 20;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StepGraphs::~StepGraphs() {
  abort_capture();
  drop_recordings();
}

void StepGraphs::drop_recordings() {
  for (auto& [key, r] : recordings_)
    if (r.exec) cudaGraphExecDestroy(r.exec);
  recordings_.clear();
}

void StepGraphs::begin_step(bool is_static) {
  MX_CHECK(!capturing_, "StepGraphs: a step began during a capture");
  static_ = is_static;
  retired_ = Tensor();
  used_ = 0;
  uploads_.clear();
}

void StepGraphs::grow_arena(size_t bytes) {
  MX_CHECK(!capturing_, "StepGraphs: the upload arena cannot grow during a capture");
  // Recordings point into the old arena: they go with it. The old arena must
  // outlive this step's earlier uploads, which still point into it, so the
  // new one starts from offset 0 only at the next step: until then this
  // step's uploads after the growth go to fresh buffers.
  drop_recordings();
  size_t size = arena_.defined() ? size_t(arena_.numel()) : kFirstArenaBytes;
  while (size < bytes) size *= 2;
  retired_ = arena_;
  arena_ = device_persistent(DType::U8, {int64_t(size)}, "step graph arena");
}

const uint8_t* StepGraphs::upload(const void* host, size_t bytes, Tensor& keep, const char* op) {
  require_not_capturing(stream_, op);
  const uint8_t* dst = nullptr;
  if (static_ && (!arena_.defined() || used_ + align_up(bytes) > size_t(arena_.numel()))) {
    grow_arena(2 * (used_ + align_up(bytes)));
    static_ = false;  // this step runs eagerly (see grow_arena)
  }
  if (static_) {
    dst = arena_.data<uint8_t>() + used_;
    uploads_.emplace_back(used_, bytes);
    used_ += align_up(bytes);
  } else {
    keep = device_empty(DType::U8, {int64_t(std::max<size_t>(bytes, 1))}, stream_);
    dst = keep.data<uint8_t>();
  }
  if (bytes)
    check_cuda(cudaMemcpyAsync(const_cast<uint8_t*>(dst), host, bytes, cudaMemcpyHostToDevice, stream_), op,
               "cudaMemcpyAsync(step data)");
  return dst;
}

Tensor StepGraphs::output(DType dtype, const Shape& shape) const {
  return Tensor(out_buffer_.storage(), 0, dtype, shape);
}

bool StepGraphs::replay(uint64_t key, Tensor& out) {
  if (!static_) return false;
  auto it = recordings_.find(key);
  if (it == recordings_.end() || it->second.uploads != uploads_) return false;
  check_cuda(cudaGraphLaunch(it->second.exec, stream_), "step graph", "cudaGraphLaunch");
  out = output(it->second.out_dtype, it->second.out_shape);
  return true;
}

bool StepGraphs::begin_capture(uint64_t key, DType out_dtype, Shape out_shape) {
  MX_CHECK(!capturing_, "StepGraphs: a capture began during a capture");
  if (!static_) return false;
  auto old = recordings_.find(key);
  if (old != recordings_.end()) {
    cudaGraphExecDestroy(old->second.exec);
    recordings_.erase(old);
  }
  const size_t bytes = size_t(shape_numel(out_shape)) * dtype_size(out_dtype);
  if (!out_buffer_.defined() || size_t(out_buffer_.numel()) < bytes) {
    // The recordings write the old buffer: they go with it.
    drop_recordings();
    size_t size = 1 << 16;
    while (size < bytes) size *= 2;
    out_buffer_ = Tensor();
    out_buffer_ = device_persistent(DType::U8, {int64_t(size)}, "step graph output");
  }
  capture_ = Recording{nullptr, out_dtype, std::move(out_shape), {}};
  capture_key_ = key;
  check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "step graph",
             "cudaStreamBeginCapture");
  capturing_ = true;
  return true;
}

Tensor StepGraphs::end_capture(Tensor out) {
  MX_CHECK(capturing_, "StepGraphs: end_capture without a capture");
  const Tensor target = output(capture_.out_dtype, capture_.out_shape);
  if (out.dtype() != target.dtype() || out.shape() != target.shape() || !on_device(out)) {
    abort_capture();
    fail("StepGraphs: the recorded step returned {}, expected {}", out.describe(), target.describe());
  }
  if (out.nbytes())
    check_cuda(cudaMemcpyAsync(target.raw(), out.raw(), out.nbytes(), cudaMemcpyDeviceToDevice, stream_),
               "step graph", "cudaMemcpyAsync(output)");
  out = Tensor();  // its memory is freed inside the recording
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  check_cuda(cudaStreamEndCapture(stream_, &graph), "step graph", "cudaStreamEndCapture");
  Recording r = std::move(capture_);
  const cudaError_t err = cudaGraphInstantiate(&r.exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(err, "step graph", "cudaGraphInstantiate");
  r.uploads = uploads_;
  check_cuda(cudaGraphLaunch(r.exec, stream_), "step graph", "cudaGraphLaunch");
  recordings_[capture_key_] = std::move(r);
  return target;
}

void StepGraphs::abort_capture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);  // fails when the capture was invalidated: nothing to keep either way
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

}  // namespace mx::cuda
