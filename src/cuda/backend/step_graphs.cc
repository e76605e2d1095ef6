#include "cuda/backend/step_graphs.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "cuda/backend/device_memory.h"

namespace mx::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kFirstArenaBytes = size_t(64) << 10;
constexpr size_t kFirstOutputBytes = size_t(64) << 10;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StepGraphs::~StepGraphs() {
  abort_capture();
  for (auto& [key, s] : shapes_) drop(s);
}

void StepGraphs::drop(ShapeState& s) {
  if (s.exec) cudaGraphExecDestroy(s.exec);
  s.exec = nullptr;
  s.out = Tensor();
  s.uploads.clear();
}

void StepGraphs::begin_step() {
  MX_CHECK(!capturing_, "StepGraphs: a step began during a capture");
  static_ = false;
  current_ = nullptr;
  retired_ = Tensor();
  used_ = 0;
  uploads_.clear();
}

void StepGraphs::begin_static_step(uint64_t key) {
  begin_step();
  static_ = true;
  current_ = &shapes_[key];
}

const uint8_t* StepGraphs::upload(const void* host, size_t bytes, Tensor& keep, const char* op) {
  // Captures on this stream are this object's, so its flag says it without
  // asking the driver on every upload.
  if (capturing_)
    fail("{}: host data that the step did not prepare cannot be part of a recorded (CUDA graph) step", op);
  if (static_ && (!current_->arena.defined() || used_ + align_up(bytes) > size_t(current_->arena.numel()))) {
    // This shape's recording points into the old arena: it goes with it. The
    // old arena outlives this step's earlier uploads (retired_), and the rest
    // of this step runs eagerly from fresh buffers.
    drop(*current_);
    size_t size = current_->arena.defined() ? size_t(current_->arena.numel()) : kFirstArenaBytes;
    while (size < 2 * (used_ + align_up(bytes))) size *= 2;
    retired_ = current_->arena;
    current_->arena = device_persistent(DType::U8, {int64_t(size)}, "step graph arena");
    static_ = false;
  }
  const uint8_t* dst = nullptr;
  if (static_) {
    dst = current_->arena.data<uint8_t>() + used_;
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

bool StepGraphs::replay(Tensor& out) {
  if (!static_ || !current_->exec || current_->uploads != uploads_) return false;
  if (cudaGraphLaunch(current_->exec, stream_) != cudaSuccess) {
    cudaGetLastError();
    drop(*current_);
    return false;
  }
  out = current_->out;
  return true;
}

bool StepGraphs::begin_capture(DType out_dtype, Shape out_shape) {
  MX_CHECK(!capturing_, "StepGraphs: a capture began during a capture");
  if (!static_) return false;
  drop(*current_);
  const size_t bytes = size_t(shape_numel(out_shape)) * dtype_size(out_dtype);
  if (!out_buffer_.defined() || size_t(out_buffer_.numel()) < bytes) {
    size_t size = kFirstOutputBytes;
    while (size < bytes) size *= 2;
    out_buffer_ = device_persistent(DType::U8, {int64_t(size)}, "step graph output");
  }
  capture_out_ = Tensor(out_buffer_.storage(), 0, out_dtype, std::move(out_shape));
  check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "step graph",
             "cudaStreamBeginCapture");
  capturing_ = true;
  return true;
}

Tensor StepGraphs::end_capture(Tensor out) {
  MX_CHECK(capturing_, "StepGraphs: end_capture without a capture");
  const Tensor target = capture_out_;
  if (out.dtype() != target.dtype() || out.shape() != target.shape() || !on_device(out)) {
    const std::string got = out.describe();
    out = Tensor();  // freed inside the capture it was allocated in
    abort_capture();
    fail("StepGraphs: the recorded step returned {}, expected {}", got, target.describe());
  }
  if (out.nbytes())
    check_cuda(cudaMemcpyAsync(target.raw(), out.raw(), out.nbytes(), cudaMemcpyDeviceToDevice, stream_),
               "step graph", "cudaMemcpyAsync(output)");
  out = Tensor();  // its memory is freed inside the recording
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  check_cuda(cudaStreamEndCapture(stream_, &graph), "step graph", "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(err, "step graph", "cudaGraphInstantiate");
  if (const cudaError_t launch = cudaGraphLaunch(exec, stream_); launch != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    check_cuda(launch, "step graph", "cudaGraphLaunch");
  }
  current_->exec = exec;
  current_->out = target;
  current_->uploads = uploads_;
  capture_out_ = Tensor();
  return target;
}

void StepGraphs::abort_capture() {
  if (capturing_) {
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);  // fails when the capture was invalidated: nothing to keep either way
    if (graph) cudaGraphDestroy(graph);
  }
  capture_out_ = Tensor();
  cudaGetLastError();  // a failed capture's error must not surface at the eager rerun's first launch
}

}  // namespace mx::cuda
