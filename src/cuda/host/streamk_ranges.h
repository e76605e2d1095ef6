// How the stream-K grid of the dense ring kernel (GemmConfig kernel 11,
// src/cuda/mxfp4_gemm_ws.cu) cuts its work, shared by host and device so that
// the CPU tests check what the kernel computes.
//
// The work is a sequence of `units` (row block, stage) units, row-block major
// (`stages` per row block). CTA c of `ctas` takes units [start(c), start(c+1)).
// A row block cut between CTAs is finished by the last of them to arrive: it
// adds the partial sums the others left in their slots and writes y. It counts
// the CTAs from the one holding the row block's first unit to the one holding
// its last as the segments to wait for, which holds only if none of them has
// an empty range: the grid is never larger than the unit count
// (streamk_grid).
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/host/host_device.h"

namespace mx::cuda {

// First unit of CTA c.
MX_HD int streamk_start(int c, int units, int ctas) { return int(int64_t(c) * units / ctas); }

// The CTA whose range holds unit u (the last one starting at or before u).
MX_HD int streamk_cta_of(int u, int units, int ctas) {
  int c = int(int64_t(u) * ctas / units);
  while (c + 1 < ctas && streamk_start(c + 1, units, ctas) <= u) ++c;
  while (c > 0 && streamk_start(c, units, ctas) > u) --c;
  return c;
}

// Which of CTA c's two partial slots holds its part of row block rb: 0 for
// the row block its range starts in, 1 for the one it ends in (a range has at
// most two partial row blocks: every one in between is whole).
MX_HD int streamk_slot(int c, int rb, int units, int ctas, int stages) {
  return rb == streamk_start(c, units, ctas) / stages ? 0 : 1;
}

// CTAs of the stream-K grid: every resident one, but never more than units.
inline int streamk_grid(int resident, int units) { return std::max(1, std::min(resident, units)); }

}  // namespace mx::cuda
