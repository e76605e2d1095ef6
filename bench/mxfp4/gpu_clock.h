// The GPU's SM clock and board power while rows are timed (NVML through
// dlopen, sampled every 2 ms by a background thread). Why: an H200 reaches its
// power cap within a second of streaming the large dense weights and then
// swings its SM clock between ~1.6 and 1.98 GHz, so identical launches timed
// at different moments of one run differ by up to 20%
// (docs/kernels.md, session 11). Each row reports the clock it ran at.
// Without NVML (no driver library) the sampler stays off and rows report 0.
// The period is 2 ms plus the queries' time, so a row timed for less than a
// few ms may get no sample (it then reports 0 and a sample count of 0).
#pragma once
#include <chrono>
#include <vector>

namespace mxbench {

using SteadyTime = std::chrono::steady_clock::time_point;

struct ClockWindow {  // an interval during which something was timed
  SteadyTime begin, end;
};

struct ClockReading {
  double sm_mhz = 0;   // median SM clock over the samples in the windows
  // Median of NVML's board power readings, which on Hopper are a 1-second
  // average: over a long run of similar rows it is their power, for a single
  // short row it also holds what ran before it.
  double power_w = 0;
  double capped = 0;   // fraction of samples with the software power cap active
  int samples = 0;
};

// Starts the sampler for CUDA device `device` (a call while it runs does
// nothing; after stop_clock_sampler it starts again).
void start_clock_sampler(int device);
void stop_clock_sampler();
// The samples taken inside any of `windows` (none: a zero reading).
ClockReading clock_during(const std::vector<ClockWindow>& windows);

}  // namespace mxbench
