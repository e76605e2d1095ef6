// Which fused-MoE path runs when nothing is forced (MoeConfig::path 0): a
// host-only rule, here so that the CPU tests check where each path starts.
#pragma once

namespace mx::cuda {

// MoeConfig::path values.
enum MoePath { kAutoPath = 0, kRouted = 1, kDirectPath = 2, kPrefillPath = 3, kWgmmaPath = 4,
               kWsPath = 5 };

// Measured on H200. <= 16 pairs (Kimi: 1-2 tokens) the direct path with
// programmatic dependent launch (docs/kernels.md, run 9: 70.0 vs 74.0 us
// routed at 1 token, 125.1 vs 129.8 at 2; equal or slightly slower from 8
// tokens). From an average of 10 pairs per expert (Kimi: 480 tokens) the
// warp-specialized wgmma path 5; else the routed decode kernels. Path 5 at
// 8192 tokens (bench/mxfp4/results-prefill-2026-11-30-ws.md, one call): 15.74
// vs 22.16 ms for the mma.sync tiles and 21.17 for the wide tiles; 6.51 vs
// 7.07 / 8.59, routed 18.29, at 2048. Its start moved from 32 to 10 pairs per
// expert on 2026-12-02 (session 13, bench/mxfp4/results-prefill-2026-12-02-s13.md,
// two rounds, path 5 with the adders' down): routed vs path 5 at 256 tokens
// 3.0 vs 4.9 ms, 384 3.9 vs 4.9, 512 4.87 vs 4.77, 768 6.7 vs 4.8, 1024 8.7
// vs 4.9 (path 5 takes ~4.8 ms from 256 to 1024 tokens: every expert's
// weights streamed once). Paths 3 and 4 are no longer picked, except:
// shapes path 5 cannot take (2I or H not a multiple of 256, more experts
// than its tile map's threads) take the mma.sync prefill tiles from 32 pairs
// per expert when 2I % 128 == 0 (measured there before session 13), else
// the routed path.
constexpr int kDirectAutoPairs = 16;
constexpr int kWsFromPairsPerExpert = 10;
constexpr int kPrefillTilesFromPairsPerExpert = 32;
constexpr int kWsMaxExperts = 1024;  // path 5's tile map: one thread per expert (dev::kMoeMapThreads)

inline bool ws_path_takes(int E, int H, int I) { return (2 * I) % 256 == 0 && H % 256 == 0 && E <= kWsMaxExperts; }

inline int choose_path(int pairs, int E, int H, int I) {
  if (pairs <= kDirectAutoPairs) return kDirectPath;
  if (ws_path_takes(E, H, I)) return pairs < kWsFromPairsPerExpert * E ? kRouted : kWsPath;
  return pairs >= kPrefillTilesFromPairsPerExpert * E && (2 * I) % 128 == 0 ? kPrefillPath : kRouted;
}

}  // namespace mx::cuda
