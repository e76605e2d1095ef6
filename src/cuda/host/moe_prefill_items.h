// Which item shape MoE prefill path 5's gate_up runs when nothing is forced
// (MoeConfig::ws_gate_up_items 0): a host-only rule, here so that the CPU
// tests check its bounds.
#pragma once

namespace mx::cuda {

// 1 = 256 rows x up to 128 pairs of one expert (fused_moe_ws.cu); 2 = 128
// rows x up to 256 pairs (fused_moe_ws_wide.cu), which loads and dequantizes
// each weight tile once per call where the 128-pair items cut almost every
// expert into a full and a partial item. H200, 2026-12-01
// (bench/mxfp4/results-prefill-2026-12-01-s8.md and the session's final
// call, bench/gpu/2026-12-01-session8/final/): 8192 Kimi tokens (170.7 pairs
// per expert on average) 14.31 vs 14.60 ms for the whole call (gate_up 8.46
// vs 8.72 ms in another call); 4096 tokens (85 per expert, one item either
// way, the wide items half as tall): gate_up 6.64 vs 4.91 ms. Nothing between
// was measured, so the wide items start at 170 pairs per expert, the measured
// point; above 256 not measured.
constexpr int kWideItemsMinPairsPerExpert = 170, kWideItemsMaxPairsPerExpert = 256;

inline int auto_gate_up_items(long long pairs, long long experts) {
  return pairs >= kWideItemsMinPairsPerExpert * experts && pairs <= kWideItemsMaxPairsPerExpert * experts ? 2 : 1;
}

}  // namespace mx::cuda
