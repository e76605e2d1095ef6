// Collectives between the ranks of one tensor/expert-parallel group. A rank is
// one device (GPU) with its own Ops backend; tensors passed here live where
// that backend keeps activations (host for the CPU backend, device memory for
// CUDA). Every rank must call the same collectives in the same order with
// tensors of the same shape and dtype (SPMD), as with NCCL.
#pragma once
#include <string>

#include "core/tensor.h"

namespace mx {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // x = sum over ranks of x (F32), in place. Every rank ends with the same
  // values (bitwise: the sum is taken in the same order everywhere).
  virtual void all_reduce_sum(Tensor& x) = 0;
  // The stream of this rank's Ops backend (Ops::device_stream()), or null:
  // a collective on a device tensor is then enqueued on that stream, in order
  // with the backend's kernels and without waiting on the host, so a step's
  // collectives can also be recorded into a CUDA graph. Ignored by
  // communicators without device streams.
  virtual void set_device_stream(void* stream) { (void)stream; }
  // Rank r's x ([rows, ...]) lands at rows [r*rows, (r+1)*rows) of the result
  // [world*rows, ...].
  virtual Tensor all_gather(const Tensor& x) = 0;
  // Sum over ranks of x ([world*rows, ...]), of which rank r keeps rows
  // [r*rows, (r+1)*rows).
  virtual Tensor reduce_scatter(const Tensor& x) = 0;

  // Called by a rank that failed: every rank blocked in (or later entering) a
  // collective throws mx::Error carrying `why` instead of waiting forever.
  virtual void abort(const std::string& why) = 0;
};

}  // namespace mx
