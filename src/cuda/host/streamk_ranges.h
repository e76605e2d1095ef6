// How the stream-K grid of the dense ring kernel (GemmConfig kernel 11,
// src/cuda/mxfp4_gemm_ws.cu) cuts its work, shared by host and device so that
// the CPU tests check what the kernel computes.
//
// The work is a sequence of `units` (row block, stage) units, row-block major
// (`stages` per row block). CTA c of `ctas` takes units [start(c), start(c+1)).
// A row block cut between CTAs is finished by its owner, the CTA holding its
// first unit (streamk_owner): that segment is the last of the owner's range.
// The others, contributors c0 + 1 .. c1 (streamk_cta_of its last unit), hold
// it in the first segment of theirs: each stores its partial sums in its slot
// and counts them in (a fence and an atomic add, no wait) at the end of its
// next segment, or at once if its range ends there; either way before its own
// wait as an owner. The owner waits for c1 - c0 counts, adds the partials in
// CTA order and writes y. Owners wait only for CTAs after them, so the grid
// finishes when its CTAs are resident at once (the launch sizes it from the
// kernel's occupancy) or, failing that, when the hardware starts CTAs in
// index order with room for two (not documented by CUDA). The counts hold
// only if no CTA has an empty range: the grid is never larger than the unit
// count (streamk_grid).
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

// The CTA that finishes row block rb (the one holding its first unit).
MX_HD int streamk_owner(int rb, int units, int ctas, int stages) { return streamk_cta_of(rb * stages, units, ctas); }

// CTAs of the stream-K grid: every resident one, but never more than units.
inline int streamk_grid(int resident, int units) { return std::max(1, std::min(resident, units)); }

}  // namespace mx::cuda
