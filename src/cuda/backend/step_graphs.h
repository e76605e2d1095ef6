// Recorded steps of one CudaOps (CUDA graphs; docs/cuda-graphs.md, the model
// side in src/model/step_graphs.h). A decode step launches hundreds of small
// kernels; recording them once per shape and replaying the recording takes the
// per-launch host cost (and the gaps it leaves on the GPU) out of every step.
//
// Two things make a recording replayable:
//   * fixed addresses for the step's host data: in a static step every upload
//     (prepared positions, token ids, row lists, attention metadata) goes to
//     the next offset of one persistent arena, so the same sequence of
//     prepares lands at the same addresses each step; the recording keeps the
//     (offset, size) list it was made with and replays only when this step's
//     list is the same;
//   * no host work inside: a capture fails (and the model runs the step
//     eagerly) when an op needs a host upload that was not prepared.
// All memory a recorded step allocates is freed inside it (stream-ordered
// allocations become the graph's own); its result is copied into one output
// buffer that all recordings share (one step runs at a time), valid until the
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

  // A static step starts (uploads go to the arena from offset 0), or an
  // ordinary one (uploads are fresh stream-ordered buffers).
  void begin_step(bool is_static);
  bool is_static() const { return static_; }
  bool capturing() const { return capturing_; }

  // A device copy of `bytes` host bytes on the stream. In a static step: at
  // the arena's next 256-byte-aligned offset (`keep` stays empty); otherwise a
  // fresh buffer that `keep` owns. Throws inside a capture (host data the
  // step did not prepare).
  const uint8_t* upload(const void* host, size_t bytes, Tensor& keep, const char* op);

  bool replay(uint64_t key, Tensor& out);
  // False (nothing started) when this step's uploads did not all go to the
  // arena (it grew during the step).
  bool begin_capture(uint64_t key, DType out_dtype, Shape out_shape);
  Tensor end_capture(Tensor out);
  void abort_capture();
  size_t recordings() const { return recordings_.size(); }

 private:
  struct Recording {
    cudaGraphExec_t exec = nullptr;
    DType out_dtype = DType::F32;
    Shape out_shape;
    std::vector<std::pair<size_t, size_t>> uploads;
  };
  Tensor output(DType dtype, const Shape& shape) const;
  void drop_recordings();
  void grow_arena(size_t bytes);

  cudaStream_t stream_;
  bool static_ = false, capturing_ = false;
  Tensor arena_, retired_;  // retired_: the arena before a growth, alive until the step ends
  size_t used_ = 0;
  std::vector<std::pair<size_t, size_t>> uploads_;  // this static step's (offset, bytes)
  std::map<uint64_t, Recording> recordings_;
  Tensor out_buffer_;  // U8, shared by the recordings
  uint64_t capture_key_ = 0;
  Recording capture_;
};

}  // namespace mx::cuda
