// MoE prefill path 5's automatic choices when nothing is forced (the
// MoeConfig::ws_* fields at 0): gate_up's item shape, who dequantizes, how
// deep gate_up's wgmma queue is, and down's epilogue. Host-only rules, here so
// that the CPU tests check them.
#pragma once

#include <cstdint>

namespace mx::cuda {

// 1 = 256 rows x up to 128 pairs of one expert (fused_moe_ws.cu); 2 = 128
// rows x up to 256 pairs, 224 with the 224-pair tiles (kAutoBoxRows,
// kTail96MaxPairsPerExpert; fused_moe_ws_wide.cu), which loads and dequantizes
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

// MoeConfig::ws_down_epilogue when 0: 1 = FP32 atomics after each item,
// 2 = deferred into the next item's K loop (DeferredAdd, 4-stage ring); 3 =
// 3/4 of them deferred, 5-stage ring; 4, 5 = on the adder warps (run_adders,
// fused_moe_ws.cuh; from T x H = 2^32: 3, adders_take below). H200, 2026-12-01
// (bench/mxfp4/results-prefill-2026-12-01.md), 8192 Kimi tokens, with the
// deep gate_up: 3 15.31 / 15.64 ms, 2 15.41 / 15.74, 1 15.71 / 15.95 in two
// calls (2048 tokens: 6.37, 6.45, 6.40); with the 2-buffer gate_up, 1 (path 5
// as of 2026-11-30) 15.84 / 16.03 and 2 15.41 / 15.74 (all on the layout before
// the 2026-12-01 bit placement). With it (a828703, bench/gpu/2026-12-01-session6/
// final/issue8): auto 14.00 ms vs 14.69 for 1 with the 2-buffer gate_up, 14.37
// for 2 with it, 14.48 for the deep gate_up with 1.
// 4 and 5 (session 13, bench/mxfp4/results-prefill-2026-12-02-s13.md): the
// adders of the producer warpgroup take the epilogue off the MMA warps
// (run_adders), 6 stages; 5 keeps one wgmma group in flight, 4 two. 8192
// tokens, three runs: down 3.88-3.94 ms (5) and 4.02-4.04 (4) against
// 5.19-5.29 (3); the call 11.95-12.01 / 11.98-12.14 / 12.98-13.06 ms.
constexpr int kAutoDownEpilogue = 5;
// MoeConfig::ws_gate_up_depth when 0: wgmma groups a gate_up warpgroup keeps
// in flight while it dequantizes the next (1: 2 A buffers; 2: 3,
// consume_item_deep). Same calls, 8192 tokens: 2 15.71 / 15.95 ms vs 1 15.84
// / 16.03 with down's atomics, 15.41 / 15.74 vs 15.41 / 15.74 deferred; 2048
// tokens 6.40 vs 6.50 (atomics), 6.45 vs 6.54 (deferred). ncu: gate_up 8.61
// ms vs 8.77.
// Session 14: the one-group kernel takes 48-row B boxes (the two-group one
// cannot: C7512), which pays where most of an expert's pairs fit one: 2048
// Kimi tokens (42.7 pairs per expert), two runs, gate_up 3111 / 3129 vs 3385 /
// 3288 us (W4A4 2982 / 2975 vs 3120 / 3135), the call's phases 4675 / 4697
// vs ~5021 / ~4886 us; at 4096 tokens (85 per expert, no 48-row boxes)
// 4612 / 4561 vs 4512 / 4525 (bench/mxfp4/results-prefill-2026-12-02-s14.md,
// call 5). So one group up to 48 pairs per expert on average (Kimi <= 2304
// tokens), two above; between 48 and 85 not measured.
constexpr int kAutoGateUpDepth = 2;
constexpr int kOneGroupMaxPairsPerExpert = 48;
inline int auto_gate_up_depth(long long pairs, long long experts) {
  return pairs <= kOneGroupMaxPairsPerExpert * experts ? 1 : kAutoGateUpDepth;
}
// MoeConfig::ws_dequant when 0: 1 = the MMA warps dequantize their own A
// fragments (RS wgmma, fused_moe_ws.cu); 2 = gate_up with a dequant warpgroup and
// SS wgmma (fused_moe_ws_ss.cu), down as 1; 3 = both GEMMs that way.
constexpr int kAutoDequant = 1;

// MoeConfig::ws_box_rows when 0: 2 = B boxes (and wgmma widths) of 48 pair
// rows for partial tiles of <= 48 pairs, 1 = 64 (as before session 14); 3 =
// as 2, and the wide gate_up on tiles of up to 224 pairs with its second box
// of 32, 48, 64 or 96 rows (Params::tail96). H200, 2026-12-02 (session 17,
// bench/mxfp4/results-prefill-2026-12-02-s17.md), 8192 Kimi tokens, six
// same-run comparisons with 2: gate_up faster in 5 (mean -107 us, -1.5%),
// the call in 5 (-0.12 to -0.23 ms).
constexpr int kAutoBoxRows = 3;

// Auto's 224-pair tiles (ws_box_rows 0 -> 3) only up to this many pairs per
// expert on average: from ~208 a large share of the experts pass 224 and
// each would be cut into a 224-pair tile and a small one that loads and
// dequantizes the expert's weights again, the cost the wide items remove.
// At 192 ~1% of the experts pass 224 (sd ~13.4). Measured (session 17, call
// 4): the 224-pair tiles forced at 213 / 235 / 256 pairs per expert made
// gate_up 7.6% / 40% / 21% slower than the 256-pair tiles; at 171 faster;
// between 171 and 213 not measured. Above it auto keeps the 256-pair tiles and
// the 48/64/128-row boxes (as ws_box_rows 2); ws_box_rows 3 forces them.
constexpr int kTail96MaxPairsPerExpert = 192;

// MoeConfig::ws_gate_up_cluster when 0: CTAs per cluster sharing the wide
// gate_up's B through TMA multicast (1 = none: each CTA copies its own B).
// H200, 2026-12-02 (bench/mxfp4/results-prefill-2026-12-02-s15.md, call 2,
// three runs at 8192 Kimi tokens, the board at its power cap): 2 CTAs 11.09
// / 11.13 / 11.27 ms against 11.43-11.55 for 1 (gate_up 6.96-7.00 vs
// 7.11-7.20 ms), W4A4 10.46-10.49 vs 10.97-11.06; 4 CTAs slower than 2
// (11.37-11.43; W4A4 10.65-10.78).
constexpr int kAutoGateUpCluster = 2;

// MoeConfig::ws_down_items when 0: 1 = down on 256-row items of up to 128
// pairs (fused_moe_ws.cu); 2 = on the wide gate_up's items, 128 rows x one
// tile of up to 224 (256) pairs (fused_moe_ws_wide.cu: each w2 tile loaded and
// dequantized once per call), each CTA copying its own B; 3 = the same on
// 2-CTA clusters sharing B by TMA multicast. 2 and 3 need the wide gate_up
// (its tile map), ws_dequant 1 and the adders' epilogue with one wgmma group
// in flight (ws_down_epilogue 5): wide_down_fits; auto takes 3 wherever they
// fit. H200, 2026-12-02 (session 18, bench/mxfp4/raw-prefill-2026-12-02-s18/),
// 8192 Kimi tokens, five runs in two calls: down 3214-3292 us on 2-CTA
// clusters, 3580-3697 with B per CTA, 3562-3595 on 4-CTA clusters (tried, not
// kept), against 3703-3846 on the 256-row items; the call 10.34-10.63 ms
// (543-558 TFLOP/s) against 10.84-11.20 (W4A4 9.71-9.96 vs 10.18-10.41). At
// 10240 tokens (213 pairs per expert, the 256-pair tiles) one run: down 4443
// (auto 4517) vs 4680 on the 256-row items, 5030 with B per CTA.
constexpr int kAutoDownItems = 3;

// The MoeConfig::ws_* fields of one call (0 = auto), and what path 5 runs.
struct WsRequest {
  int dequant, gate_up_items, down_epilogue, gate_up_depth, box_rows = 0, gate_up_cluster = 0, down_items = 0;
};
struct WsChoices {
  int dequant, epilogue;
  bool deep, wide_gate_up;
  // 48-row B boxes (Params::fine_boxes) in gate_up / down: only in the RS
  // kernels with one wgmma group in flight and the wide gate_up (the SS
  // kernels and those with two groups in flight keep 64).
  bool fine_gate_up, fine_down;
  // The wide gate_up on tiles of up to 224 pairs, its second box 32/48/64/96
  // rows (ws_box_rows 3).
  bool tail96;
  // CTAs per cluster sharing the wide gate_up's B (TMA multicast): 1 or 2
  // (1 for the other gate_up kernels).
  int gate_up_cluster;
  // down on the wide gate_up's items (ws_down_items 2, 3) and the CTAs per
  // cluster sharing its B (1 or 2; 1 for the 256-row down).
  bool wide_down;
  int down_cluster;
  // The fine boxes the launched down kernel reads (Params::fine_boxes): the
  // wide down runs on gate_up's items, so it takes gate_up's.
  bool down_boxes_fine() const { return wide_down ? fine_gate_up : fine_down; }
  // Each expert's y rounded to BF16 (the adders' epilogue; the SS down of
  // ws_dequant 3 keeps its own deferred FP32 adds).
  bool rounds_y() const { return epilogue >= 4 && dequant != 3; }
};

// The adders add into `out` at 32-bit offsets (run_adders): T x H < 2^32
// floats; beyond, auto falls back to the MMA warps' deferred FP32 atomics (3).
inline bool adders_take(int64_t out_elems) { return out_elems < (int64_t(1) << 32); }

// down on the wide items runs in the wide gate_up's tile map, with the MMA
// warps dequantizing (RS wgmma) and the adders' epilogue, one wgmma group in
// flight (the only one fused_moe_ws_wide.cu compiles).
inline bool wide_down_fits(const WsChoices& c) { return c.wide_gate_up && c.dequant == 1 && c.epilogue == 5; }

// out_elems = T x H.
inline WsChoices resolve_ws_choices(const WsRequest& asked, long long pairs, long long experts, int64_t out_elems) {
  WsChoices c;
  c.dequant = asked.dequant ? asked.dequant : kAutoDequant;
  const int gate_up_items = asked.gate_up_items ? asked.gate_up_items
                            : c.dequant >= 2     ? 1
                                                 : auto_gate_up_items(pairs, experts);
  c.wide_gate_up = gate_up_items == 2;
  c.epilogue = asked.down_epilogue      ? asked.down_epilogue
               : adders_take(out_elems) ? kAutoDownEpilogue
                                        : 3;
  c.deep = (asked.gate_up_depth ? asked.gate_up_depth : auto_gate_up_depth(pairs, experts)) == 2;
  const int boxes = asked.box_rows ? asked.box_rows : kAutoBoxRows;
  const bool fine = boxes >= 2;
  c.fine_gate_up = fine && c.dequant == 1 && (c.wide_gate_up || !c.deep);
  c.fine_down = fine && c.dequant != 3 && c.epilogue != 4;
  c.gate_up_cluster = c.wide_gate_up ? (asked.gate_up_cluster ? asked.gate_up_cluster : kAutoGateUpCluster) : 1;
  c.tail96 = c.wide_gate_up && boxes == 3 &&
             (asked.box_rows == 3 || pairs <= kTail96MaxPairsPerExpert * experts);
  const int down_items = asked.down_items ? asked.down_items : kAutoDownItems;
  c.wide_down = down_items >= 2 && wide_down_fits(c);
  c.down_cluster = c.wide_down && down_items == 3 ? 2 : 1;
  return c;
}

}  // namespace mx::cuda
