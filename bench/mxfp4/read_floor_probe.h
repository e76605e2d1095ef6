// --read-probe (issue #8, session 9): how fast can one launch stream a weight's
// bytes from HBM on this GPU, and by which kind of load? --dense-small's
// read-only launch (16-byte LDG past L1, 4 in flight per thread, 2048 threads
// per SM) reads at ~84% of the copy rate (1.19x of the byte floor at both
// dense shapes, so a rate, not a fixed cost). The decode kernels are judged
// against the copy floor; a design that feeds them (bulk copies into shared
// memory by one thread, the plan of docs/kernels.md) is only worth building if
// its memory side reads faster than the LDG launch. Each probe reads the same
// bytes once per launch (copies rotated past the L2), timed like the GEMMs
// (events around each launch, median).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_clock.h"

namespace mxbench {

struct ReadProbe {
  std::string label;
  double us = 0;
  ClockWindow timed;  // when it was timed (its row's clock, gpu_clock.h)
};

// Both take `copies` copies of `bytes` bytes each at `buf` (16-byte aligned,
// bytes % 16 == 0), one copy per launch in turn.
// The read-only launch (--dense-small's practical floor of one launch): 16-byte
// loads that skip L1, grid-stride over the whole weight, 4 in flight per
// thread, 8 CTAs x 256 threads per SM; microseconds per launch.
double time_read_only_launch(const uint8_t* buf, size_t bytes, int copies, cudaStream_t s);
// Every other probe variant (per-SM contiguous ranges by LDG or bulk copies).
std::vector<ReadProbe> run_read_probes(const uint8_t* buf, size_t bytes, int copies, cudaStream_t s);

}  // namespace mxbench
