// Recorded steps of one CudaOps (CUDA graphs; docs/cuda-graphs.md, the model
// side in src/model/step_graphs.h). A decode step launches hundreds of small
// kernels; recording them once per shape and replaying the recording takes the
// per-launch host cost (and the gaps it leaves on the GPU) out of every step.
//
// Two things make a recording replayable:
//   * fixed addresses for the step's host data: in a static step every upload
//     (prepared positions, token ids, row lists, attention metadata) goes to
//     the next offset of its shape's persistent arena, so the same sequence of
//     prepares lands at the same addresses each step; the recording keeps the
//     (offset, size) list it was made with and replays only when this step's
//     list is the same;
//   * no host work inside: a capture fails (and the model runs the step
//     eagerly) when an op needs a host upload that was not prepared.
// All memory a recorded step allocates is freed inside it (stream-ordered
// allocations become the graph's own); its result is copied into an output
// buffer that recordings share (one step runs at a time), valid until the
// next step.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace mx::cuda {

class StepGraphs {
 public:
  explicit StepGraphs(cudaStream_t stream) : stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // An ordinary step starts (uploads are fresh stream-ordered buffers), or a
  // static step of shape `key` (uploads go to that shape's arena from offset
  // 0; each shape has its own, so no shape's growth moves another's).
  void begin_step();
  void begin_static_step(uint64_t key);
  bool is_static() const { return static_; }
  bool capturing() const { return capturing_; }

  // A device copy of `bytes` host bytes on the stream. In a static step: at
  // the arena's next 256-byte-aligned offset (`keep` stays empty); otherwise a
  // fresh buffer that `keep` owns. Throws inside a capture (host data the
  // step did not prepare).
  const uint8_t* upload(const void* host, size_t bytes, Tensor& keep, const char* op);

  // Launches the recording of this static step's shape when its uploads are
  // the recorded ones; false (run eagerly) otherwise, or when the launch
  // fails (the recording is dropped then).
  bool replay(Tensor& out);
  // False (nothing started) when this step's uploads did not all go to the
  // arena (it grew during the step).
  bool begin_capture(DType out_dtype, Shape out_shape);
  Tensor end_capture(Tensor out);
  void abort_capture();

 private:
  struct ShapeState {
    Tensor arena;                 // this shape's uploads
    cudaGraphExec_t exec = nullptr;
    Tensor out;                   // where the recording writes its result
    std::vector<std::pair<size_t, size_t>> uploads;  // the recording's (offset, bytes)
  };
  void drop(ShapeState& s);

  cudaStream_t stream_;
  bool static_ = false, capturing_ = false;
  std::map<uint64_t, ShapeState> shapes_;
  ShapeState* current_ = nullptr;  // the static step's shape
  Tensor retired_;                 // an arena replaced during this step, alive until the next
  size_t used_ = 0;
  std::vector<std::pair<size_t, size_t>> uploads_;  // this static step's (offset, bytes)
  // The newest output buffer; a recording keeps the one it was made with
  // alive (its `out`), so growing it drops nothing.
  Tensor out_buffer_;
  Tensor capture_out_;
};

}  // namespace mx::cuda
