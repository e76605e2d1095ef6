// Per-phase timing of one fused-MoE call on path 5 (the --moe-prefill part of
// moe_bench.cu): MoeConfig::phase_events makes fused_moe_decode record
// kMoePhaseEvents events between its launches; `iters` calls run back to back
// (as in the timed rows) and each phase's median is reported, so that the
// router, tile map, gather and the two GEMMs can be told apart, launch gaps
// included in the phase that follows them.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/mxfp4_kernels.h"
#include "timing.h"

namespace mxbench {

// step(i) runs call i with `cfg` (captured by reference by the caller).
template <class Step>
std::string moe_phase_note(Step step, mx::cuda::MoeConfig& cfg, int iters, cudaStream_t s) {
  constexpr int kEv = mx::cuda::kMoePhaseEvents;
  std::vector<cudaEvent_t> ev(size_t(iters) * kEv);
  for (auto& e : ev) timing_check(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < iters; ++i) {
    cfg.phase_events = ev.data() + size_t(i) * kEv;
    step(i);
  }
  cfg.phase_events = nullptr;
  timing_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  static const char* const names[kEv - 1] = {"router", "tile map", "gather", "gate_up", "down"};
  std::string note = ", phases us (median of " + std::to_string(iters) + "):";
  double sum = 0;
  for (int p = 0; p + 1 < kEv; ++p) {
    std::vector<float> t(iters);
    for (int i = 0; i < iters; ++i)
      timing_check(cudaEventElapsedTime(&t[i], ev[size_t(i) * kEv + p], ev[size_t(i) * kEv + p + 1]),
                   "cudaEventElapsedTime");
    std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
    const double us = 1000.0 * t[iters / 2];
    sum += us;
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.0f", names[p], us);
    note += buf;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, ", sum %.0f", sum);
  note += buf;
  for (auto& e : ev) cudaEventDestroy(e);
  return note;
}

}  // namespace mxbench
