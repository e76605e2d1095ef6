// The result rows and run state that mxfp4_bench's parts share (mxfp4_bench.cu,
// moe_bench.cu): one definition each in bench_rows.cu, so that every part
// appends to the same table and draws from the same seed sequence.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "gpu_clock.h"

namespace mxbench {

struct Row {  // one result line
  std::string kernel, shape, mode, note;
  int M = 0;
  double us = 0, floor_us = 0, rel_err = -1;
  long nan_count = -1;
  double extra = 0;  // MoE: touched experts
  // The relative-error bound report.py applies; 0 = its default for `kernel`.
  double err_bound = 0;
  // When the row's time was taken, for its GPU clock (gpu_clock.h); empty:
  // the last median_us's window. Rows without a time report no clock.
  std::vector<ClockWindow> windows;
  double sm_mhz = 0, power_w = 0, capped = 0;  // filled by emit (gpu_clock.h)
  int clock_samples = 0;
};

extern std::vector<Row> g_rows;  // every emitted row, for the table at the end
extern std::FILE* g_json;        // --json FILE: one JSON line per row, or null
extern bool g_decode;            // --decode (also set by --moe-decode)
extern bool g_dense;             // --dense
extern bool g_dense_small;       // --dense-small
// --moe-only A|B|..: the fused-MoE rows whose label contains one of the
// '|'-separated parts, the others skipped (a few kernels under ncu without
// the rest of the table).
extern const char* g_moe_only;
extern double g_copy_gbps;  // copy bandwidth (read + write) measured at the start
extern uint64_t g_seed;     // the run's seed (--seed N, printed)

bool moe_row_selected(const char* label);
// Appends `r` to g_rows and prints it (and writes it to g_json) as a JSON line.
void emit(const Row& r);
// Microseconds to move `bytes` at g_copy_gbps: a row's byte floor.
double floor_us(double bytes);
// The next seed of the run's sequence (each input buffer takes one).
uint64_t next_seed();

}  // namespace mxbench
