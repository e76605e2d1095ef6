// The fused-MoE variants of mxfp4_bench at each token count (moe_variants.h).
#include "moe_variants.h"

namespace mxbench {

namespace {

// A decode variant with named fields (others set the later fields by name).
Variant decode_variant(const char* label, int path, int down_ks, int loads, int pdl, bool w4a4 = false,
                       int gate_up_ks = 0, bool x_pre = false) {
  Variant v{label, path, down_ks, loads, pdl};
  v.w4a4 = w4a4;
  v.gate_up_ks = gate_up_ks;
  v.x_pre = x_pre;
  return v;
}

// The rule before the wide kernels (2026-11-30): direct + PDL with 3-tile
// batches at 1 token, direct + PDL with register loads at 2, routed above.
Variant before_rule(int T) {
  Variant v = T == 1   ? decode_variant("before: direct, batched <= 64 regs, PDL", 2, 0, 5, 1)
              : T == 2 ? decode_variant("before: direct, registers, PDL", 2, 0, 1, 1)
                       : decode_variant("before: routed, registers", 1, 0, 1, 2);
  v.before = true;
  return v;
}

// The previous rule in W4A16, W4A4, and W4A4 with x quantized by the caller.
void add_before_rule(int T, const Variant& before, std::vector<Variant>& vs) {
  vs.push_back(before);
  Variant b4 = before;
  b4.w4a4 = true;
  vs.push_back(b4);
  b4.x_pre = true;
  b4.label = T == 1 ? "before: direct, batched <= 64 regs, PDL, x quantized by the caller"
             : T == 2 ? "before: direct, registers, PDL, x quantized by the caller"
                      : "before: routed, registers, x quantized by the caller";
  vs.push_back(b4);
}

// Decode sizes (up to 40 tokens): the wide kernels with their K slices and
// PDL, then the other weight-load styles of the direct and routed paths.
void add_decode_variants(int T, bool decode, std::vector<Variant>& vs) {
  if (T <= 8) {
    vs.push_back(decode_variant("direct, wide, PDL", 2, 0, 6, 1));
    vs.push_back(decode_variant("direct, wide, PDL", 2, 0, 6, 1, true));
    vs.push_back(decode_variant("direct, wide, PDL, x quantized by the caller", 2, 0, 6, 1, true, 0, true));
  }
  if (T == 1) {
    vs.push_back(decode_variant("direct, wide, PDL, gate_up ks=4", 2, 0, 6, 1, false, 4));
    vs.push_back(decode_variant("direct, wide, PDL, gate_up ks=1", 2, 0, 6, 1, false, 1));
    vs.push_back(decode_variant("direct, wide, PDL, down ks=4", 2, 4, 6, 1));
    vs.push_back(decode_variant("direct, wide, PDL, down ks=1", 2, 1, 6, 1));
    vs.push_back(decode_variant("direct, wide, no PDL", 2, 0, 6, 2));
  }
  if (T == 2) vs.push_back(decode_variant("direct, wide, PDL, gate_up ks=2", 2, 0, 6, 1, false, 2));
  if (T == 2) vs.push_back(decode_variant("direct, wide, PDL, down ks=4", 2, 4, 6, 1));
  if (T == 8 || T == 40) {
    vs.push_back(decode_variant("routed, wide", 1, 0, 6, 2));
    vs.push_back(decode_variant("routed, wide, PDL", 1, 0, 6, 1));
    vs.push_back(decode_variant("routed, wide", 1, 0, 6, 2, true));
  }
  if (T <= 40) vs.push_back({"routed, registers, PDL", 1, 0, 1, 1});
  if (T <= 8) vs.push_back({"direct, registers", 2, 0, 1, 2});
  if (T <= 8) vs.push_back({"direct, registers, PDL", 2, 0, 1, 1});
  if ((T == 1 || T == 40) && !decode) vs.push_back({"routed, ring, PDL", 1, 0, 2, 1});
  // Bulk rings (74-80 us at 1 token, 2026-11-30): not in --decode any more.
  if (T <= 8 && !decode) vs.push_back({"direct, bulk, PDL", 2, 0, 3, 1});
  if (T <= 8 && !decode) vs.push_back({"direct, bulk, PDL, down ks=1", 2, 1, 3, 1});
  if (T <= 8) vs.push_back({"direct, batched registers, PDL", 2, 0, 4, 1});
  if (T <= 8) vs.push_back({"direct, batched registers, PDL, down ks=1", 2, 1, 4, 1});
  if (T <= 8) vs.push_back({"direct, batched <= 64 regs, PDL", 2, 0, 5, 1});
  if (T == 8 || T == 40) vs.push_back({"routed, batched registers", 1, 0, 4, 2});
  if (T == 40 && !decode) vs.push_back({"routed, bulk, PDL", 1, 0, 3, 1});
}

// Path 5's gate_up pipeline depth x down epilogue (MoeConfig::ws_gate_up_depth,
// ws_down_epilogue); (1, 1) is path 5 as of 2026-11-30.
void add_ws_pipeline_variants(int T, std::vector<Variant>& vs) {
  for (int depth : {1, 2})
    for (int down : {1, 2, 3})
      for (bool w4a4 : {false, true}) {
        if (T < 512 || (w4a4 && (T < 2048 || depth != down)) || (down == 3 && depth == 1)) continue;
        static const char* const labels[2][3] = {
            {"warp-specialized, gate_up wait_group 1, down atomics (2026-11-30)",
             "warp-specialized, gate_up wait_group 1, down deferred", ""},
            {"warp-specialized, gate_up wait_group 2, down atomics",
             "warp-specialized, gate_up wait_group 2, down deferred",
             "warp-specialized, gate_up wait_group 2, down 3/4 deferred, 5 stages"}};
        Variant v{labels[depth - 1][down - 1], 5, 0, 0, 0, w4a4, down};
        v.ws_depth = depth;
        v.ws_items = 1;  // the 256-row items these settings belong to
        vs.push_back(v);
      }
}

// Path 5's down epilogues beside auto (5: on the producer warpgroup's adder
// warps, one wgmma group in flight): 4 = the same with two groups, 3 = the
// MMA warps' deferred FP32 atomics (auto before 2026-12-02, session 13). (The
// 3-CTA rows of add_ws_item_variants run auto's adders across many items.)
void add_ws_down_variants(int T, std::vector<Variant>& vs) {
  if (T < 512) return;
  for (int down : {3, 4})
    for (bool w4a4 : {false, true}) {
      Variant v{down == 4 ? "warp-specialized, down on adder warps, wait_group 2"
                          : "warp-specialized, down 3/4 deferred atomics (auto before 2026-12-02 s13)",
                5, 0, 0, 0, w4a4, down};
      vs.push_back(v);
    }
}

// Path 5 with a dequant warpgroup feeding SS wgmma (MoeConfig::ws_dequant):
// gate_up only (2), both GEMMs with down's first 8 steps deferred (3, down
// epilogue auto) or its atomics (3, down 1), beside the RS rows above.
void add_ws_dequant_variants(int T, std::vector<Variant>& vs) {
  if (T < 512) return;
  for (int dq : {2, 3})
    for (int down : {0, 1})
      for (bool w4a4 : {false, true}) {
        if ((dq == 2 && down == 1) || (w4a4 && (T < 2048 || down == 1))) continue;
        static const char* const dq_labels[3] = {
            "warp-specialized, dequant warpgroup + SS wgmma: gate_up",
            "warp-specialized, dequant warpgroup + SS wgmma: both, down 8 steps deferred",
            "warp-specialized, dequant warpgroup + SS wgmma: both, down atomics"};
        Variant v{dq_labels[dq == 2 ? 0 : down == 0 ? 1 : 2], 5, 0, 0, 0, w4a4, down};
        v.ws_dequant = dq;
        vs.push_back(v);
      }
}

// A path-5 variant with its MoeConfig::ws_* settings set by `set`, in
// W4A16 and then in W4A4.
template <class Set>
void add_ws_variant_both_modes(const char* label, Set set, std::vector<Variant>& vs) {
  Variant v{label, 5, 0, 0, 0};
  set(v);
  for (bool w4a4 : {false, true}) {
    v.w4a4 = w4a4;
    vs.push_back(v);
  }
}

// Path 5's gate_up work items and persistent-CTA count.
void add_ws_item_variants(int T, std::vector<Variant>& vs) {
  // gate_up on 256-row items with one wgmma group in flight, the 256-row
  // kernel that takes 48-row boxes (the two-group one does not), beside auto
  // where auto keeps two groups or runs the wide items (Kimi: from 2305 tokens).
  if (T >= 4096)
    add_ws_variant_both_modes("warp-specialized, gate_up 256-row items, one group in flight, 48-row boxes",
                              [](Variant& v) { v.ws_items = 1, v.ws_depth = 1; }, vs);
  // Partial pair tiles in 64-row B boxes (auto before session 14), beside
  // auto's 48-row boxes for tiles of <= 48 pairs.
  if (T >= 512)
    add_ws_variant_both_modes("warp-specialized, B boxes of 64 rows (auto before 2026-12-02 s14)",
                              [](Variant& v) { v.ws_box = 1; }, vs);
  // The wide gate_up on tiles of 256 pairs, the pairs past 128 in boxes of
  // 48, 64 or 128 rows (auto before session 17), beside auto's 224-pair
  // tiles with boxes of 32, 48, 64 or 96.
  if (T >= 512)
    add_ws_variant_both_modes("warp-specialized, wide tiles of 256 pairs, boxes 48/64/128 (auto before 2026-12-02 s17)",
                              [](Variant& v) { v.ws_box = 2; }, vs);
  // The 224-pair tiles forced where auto stops taking them (past 192 pairs
  // per expert on average: experts past 224 cut in two), to measure that limit.
  if (T >= 9216)
    add_ws_variant_both_modes("warp-specialized, wide tiles of 224 pairs forced (ws_box_rows 3)",
                              [](Variant& v) { v.ws_box = 3; }, vs);
  // Path 5 as auto was before session 8 (gate_up on 256-row items), beside
  // auto, which takes the wide items from 160 pairs per expert.
  if (T >= 2048)
    add_ws_variant_both_modes("warp-specialized, gate_up items 256 rows x 128 pairs (auto before 2026-12-01 s8)",
                              [](Variant& v) { v.ws_items = 1; }, vs);
  // Path 5's gate_up on items of 128 rows x up to 256 pairs (one per expert
  // and row block at ~171 pairs per expert), beside auto. Since session 17
  // these wide items are tiles of up to 224 pairs wherever auto's box rule
  // takes them (up to 192 pairs per expert); the labels below keep "256" so
  // that the older call scripts' --moe-only filters still select them.
  if (T >= 512)
    add_ws_variant_both_modes("warp-specialized, gate_up items 128 rows x 256 pairs",
                              [](Variant& v) { v.ws_items = 2; }, vs);
  // down on the 256-row items, and on the wide gate_up's items (128 rows x one
  // tile of up to 224 pairs: w2 dequantized once per call) with each CTA
  // copying its B or 2-CTA clusters sharing it (auto), beside auto (the wide
  // gate_up forced where auto has not). (4-CTA clusters: slower, session 18.)
  if (T >= 2048) {
    add_ws_variant_both_modes("warp-specialized, down on 256-row items (auto before 2026-12-02 s18)",
                              [](Variant& v) { v.down_items = 1; }, vs);
    add_ws_variant_both_modes("warp-specialized, down on the wide items, B per CTA (ws_down_items 2)",
                              [](Variant& v) { v.ws_items = 2, v.down_items = 2; }, vs);
    add_ws_variant_both_modes("warp-specialized, down on the wide items, 2-CTA clusters (ws_down_items 3)",
                              [](Variant& v) { v.ws_items = 2, v.down_items = 3; }, vs);
  }
  // The wide gate_up with each CTA copying its own B, beside auto's 2-CTA
  // clusters sharing it (TMA multicast).
  if (T >= 512)
    add_ws_variant_both_modes("warp-specialized, gate_up 128 x 256 items, B per CTA (auto before 2026-12-02 s15)",
                              [](Variant& v) { v.ws_items = 2, v.gu_cluster = 1; }, vs);
  // Path 5 on 3 persistent CTAs: each runs many items, so down's deferred adds
  // cross items and the last item's are flushed at the end (a correctness
  // row; one CTA per SM leaves ~1 item per CTA at small sizes).
  if (T == 512)
    for (bool w4a4 : {false, true}) {
      Variant v{"warp-specialized, 3 CTAs (many items each)", 5, 0, 0, 0, w4a4};
      v.ws_ctas = 3;
      vs.push_back(v);
      v.label = "warp-specialized, dequant warpgroup both GEMMs, 3 CTAs (many items each)";
      v.ws_dequant = 3;
      vs.push_back(v);
      // gate_up as one 2-CTA cluster sharing B (auto's multicast).
      v.label = "warp-specialized, gate_up items 128 rows x 256 pairs, 3 CTAs (many items each)";
      v.ws_dequant = 0;
      v.ws_items = 2;
      vs.push_back(v);
    }
}

// Prefill sizes (from 512 tokens): the routed decode path, the three prefill
// paths, then path 5's settings.
void add_prefill_variants(int T, std::vector<Variant>& vs) {
  if (T == 512 || T == 2048) vs.push_back({"routed, registers", 1, 0, 1, 2});
  if (T >= 512) vs.push_back({"prefill tiles, mma.sync", 3, 0, 0, 0});
  if (T >= 512) vs.push_back({"prefill on wgmma, wide tiles", 4, 0, 0, 0});
  // Path 5 from 256 tokens (--moe-tokens): where the routed path hands over.
  if (T >= 256) vs.push_back({"prefill on wgmma, warp-specialized", 5, 0, 0, 0});
  add_ws_pipeline_variants(T, vs);
  add_ws_down_variants(T, vs);
  add_ws_dequant_variants(T, vs);
  add_ws_item_variants(T, vs);
}

// Decode sizes: the auto and the previous rule once more at the end, so
// that an order effect (clocks, L2 state) shows as a difference between
// two rows of one configuration.
void add_repeats(int T, const Variant& before, std::vector<Variant>& vs) {
  Variant again = vs[0];
  again.label = "auto, again";
  vs.push_back(again);
  again = before;
  again.label = T == 1 ? "before: direct, batched <= 64 regs, PDL, again" : "before: direct, registers, PDL, again";
  vs.push_back(again);
}

}  // namespace

std::vector<Variant> moe_variants(int T, bool decode) {
  std::vector<Variant> vs = {{"auto", 0, 0, 0, 0}, {"auto", 0, 0, 0, 0, true}};
  // W4A4 as the engine calls it: CudaOps quantizes x in its F32 -> BF16
  // conversion and passes MoeConfig::x_quantized, so the MoE never runs the
  // quantizer of the row above (scorecard.py judges W4A4 decode on this row).
  if (T <= 40) vs.push_back(decode_variant("auto, x quantized by the caller", 0, 0, 0, 0, true, 0, true));
  const Variant before = before_rule(T);
  if (T <= 40) add_before_rule(T, before, vs);
  add_decode_variants(T, decode, vs);
  add_prefill_variants(T, vs);
  if (T <= 2) add_repeats(T, before, vs);
  return vs;
}

// Decode sizes: auto, the bulk-ring, batched and wide loads (3 and above) and
// the previous rule. Prefill sizes: the warp-specialized path only (its
// host-side tensor maps must be captured by value), on one CTA per SM with
// its default pipeline and epilogue and not on the 256-row items.
bool gets_graph_row(const Variant& v, int T) {
  if (T >= 512)
    return v.path == 5 && v.ws_down == 0 && v.ws_depth == 0 && v.ws_ctas == 0 && v.ws_items != 1;
  return (v.path == 0 && v.pdl == 0) || v.loads >= 3 || v.before;
}

}  // namespace mxbench
