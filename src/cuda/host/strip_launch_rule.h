// Two host-only rules of the dense MXFP4 GEMM (src/cuda/mxfp4_gemm.cu), here
// so that the CPU tests check them: how the strip kernels are launched
// (programmatic dependent launch, and how many of each warp's first weight
// tiles are asked of the L2 before the wait), and which weights take the
// strip-pair kernel (GemmConfig kernel 9) at 9..16 tokens.
#pragma once
#include <cstdint>

#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {

// How a strip kernel (GemmConfig kernels 1, 2, 5, 6, 8, 9, 12) is launched.
struct StripLaunch {
  bool pdl = true;
  int prefetch_tiles = 2;
};

// forced_pdl: GemmConfig::pdl (0 = the rule, 1 = on, -1 = off); forced_prefetch:
// GemmConfig::prefetch_tiles (0 = the rule, -1 = none, n > 0 = n tiles with or
// without PDL); both validated by the caller. The rule: PDL up to 16 tokens
// except kernel 8, whose one wave of CTAs lands unevenly when the next launch's
// CTAs take slots as they free (7-9% slower under it); 2 tiles under PDL and
// none without (nothing runs beside a prefetch then: kernel 8 ran 1.5-1.9%
// faster without). H200, 2026-12-02, bench/mxfp4/results-dense-small-2026-12-02-s11.md.
inline StripLaunch choose_strip_launch(int forced_pdl, int forced_prefetch, int kernel, int M) {
  StripLaunch sl;
  sl.pdl = forced_pdl ? forced_pdl > 0 : kernel != 8 && M <= 16;
  if (forced_prefetch) sl.prefetch_tiles = forced_prefetch > 0 ? forced_prefetch : 0;
  else sl.prefetch_tiles = sl.pdl ? 2 : 0;
  return sl;
}

// Whether the rule takes the strip-pair kernel for an [rows, cols] weight at M
// tokens (the caller also checks that the kernel supports the shape): 9..16
// tokens on weights of >= 64M elements (36864x7168 at 12 / 16 tokens 45.7 /
// 46.5 vs 57.0 / 64.9 us for kernel 1, 2026-12-01), and since 2026-12-02 on
// weights of >= 224 strip pairs with K >= 2048 (MLA o_proj 7168x8192 at 16
// tokens 13.0 vs 13.8 us; expert down 7168x2048 a tie). Left out: 4096x7168
// (128 pairs: 11.11 vs 7.91) and K < 2048 (MLA q_b_proj 12288x1536: 6.93 vs 6.65).
inline bool strip_pair_by_rule(int64_t rows, int64_t cols, int M) {
  const bool large = rows * cols >= (int64_t(64) << 20);
  const bool enough_pairs = rows / (2 * kStripRows) >= 224 && cols >= 2048;
  return M > 8 && M <= 16 && (large || enough_pairs);
}

}  // namespace mx::cuda
