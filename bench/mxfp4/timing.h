// Event timing shared by the MXFP4 bench's parts (mxfp4_bench.cu,
// bench_w4a4_fp8.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu_clock.h"

namespace mxbench {

// The median of `v` (the upper middle one of an even count); reorders `v`.
template <class T>
T median_of(std::vector<T>& v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The host-side interval of the last median_us's timed calls (the GPU clock
// of a row is read over it, gpu_clock.h).
inline ClockWindow& last_timed_window() {
  static ClockWindow w;
  return w;
}

inline void timing_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "CUDA error %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// Median time of one call of `fn(i)` in microseconds after `warmup` calls;
// each call is bracketed by events, calls run back to back.
template <class F>
double median_us(F fn, int iters, cudaStream_t s, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) fn(i);
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& e : ev) timing_check(cudaEventCreate(&e), "cudaEventCreate");
  last_timed_window().begin = std::chrono::steady_clock::now();
  timing_check(cudaEventRecord(ev[0], s), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) {
    fn(i);
    timing_check(cudaEventRecord(ev[i + 1], s), "cudaEventRecord");
  }
  timing_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  last_timed_window().end = std::chrono::steady_clock::now();
  std::vector<float> t(iters);
  for (int i = 0; i < iters; ++i) timing_check(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]), "cudaEventElapsedTime");
  for (auto& e : ev) cudaEventDestroy(e);
  return 1000.0 * median_of(t);
}

}  // namespace mxbench
