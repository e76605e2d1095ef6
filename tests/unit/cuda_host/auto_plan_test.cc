// The host-side automatic choices of two MXFP4 kernels: the dense ring
// kernel's plan (cuda/host/dense_ring_plan.h, kernel 11) and MoE prefill path
// 5's settings (cuda/host/moe_prefill_items.h: gate_up's item shape, down's
// epilogue and the adders' limit). The kernels exist only
// for some combinations (16 consumer warps need 256-row CTAs, the producer
// warp runs stream-K only), so every plan the rule can return must be one of
// them; the measured shapes keep the plan they were measured with.
#include <gtest/gtest.h>

#include <string>

#include "cuda/host/dense_ring_plan.h"
#include "cuda/host/moe_prefill_items.h"

namespace mx::cuda {
namespace {

TEST(DenseRingPlan, EveryAutomaticPlanIsOneTheKernelInstantiates) {
  for (int sms : {78, 114, 132})
    for (int stages : {1, 4, 16, 56, 144})
      for (int64_t blocks = 1; blocks <= 700; ++blocks)
        for (int M = 17; M <= 64; ++M) {
          const RingPlan p = choose_ring_plan(blocks, stages, M, sms);
          SCOPED_TRACE(testing::Message() << "blocks " << blocks << " stages " << stages << " M " << M << " sms " << sms);
          if (p.ring_warps == 16) {
            ASSERT_EQ(blocks % 2, 0) << "16 consumer warps need whole 256-row CTAs";
            ASSERT_GE(blocks / 2, sms) << "16 consumer warps only with a 256-row block per SM";
          }
          if (p.ring_warps != 0) {
            ASSERT_TRUE(p.ring_warps == 8 || p.ring_warps == 16);
            ASSERT_EQ(p.splits, 0) << "the producer warp runs stream-K only";
            ASSERT_EQ(p.strips, 1);
            ASSERT_EQ(p.ctas, 2);  // launch_plan runs 16 consumer warps as 1 CTA per SM whatever this says
          } else {
            ASSERT_TRUE(p.splits == 1 || p.splits == 2 || p.splits == 4 || p.splits == 8) << p.splits;
            ASSERT_EQ(p.ctas, 1);
          }
        }
}

// W4A4 on FP8 MMAs where sessions 24 and 25 measured it faster: every measured
// shape keeps its side, nothing outside 12..64 tokens.
TEST(DenseRingPlan, Fp8DenseTakesTheShapesItWonOn) {
  for (int M : {12, 16, 32, 64}) EXPECT_TRUE(fp8_dense_chosen(36864, 7168, M)) << M;
  for (int M : {12, 16, 32, 64}) EXPECT_TRUE(fp8_dense_chosen(7168, 18432, M)) << M;
  EXPECT_FALSE(fp8_dense_chosen(4096, 7168, 16));
  EXPECT_TRUE(fp8_dense_chosen(8192, 8192, 12));   // exactly 64 M values
  EXPECT_FALSE(fp8_dense_chosen(8192, 8064, 16));  // just under
  EXPECT_TRUE(fp8_dense_chosen(4096, 7168, 64));
  for (int M : {1, 8, 11, 65, 512}) EXPECT_FALSE(fp8_dense_chosen(36864, 7168, M)) << M;
  // Its consumer warps (mxfp4_gemm_fp8) follow the ring plan's rule: 36864 rows
  // (288 blocks of 128) on 132 SMs 16, 7168 (56) and an odd block count 8.
  EXPECT_EQ(ring_consumer_warps(288, 132), 16);
  EXPECT_EQ(ring_consumer_warps(56, 132), 8);
  EXPECT_EQ(ring_consumer_warps(289, 132), 8);
}

TEST(DenseRingPlan, MeasuredShapesKeepTheirPlans) {
  // H200 (132 SMs), bench/gpu/2026-12-01-session8/final/: 36864x7168 (288
  // blocks, 56 stages) at 32 / 64 tokens on 16 consumer warps, 7168x18432 (56
  // blocks, 144 stages) at 32 on 8; since session 22 (owners' sums) at 64 on
  // 8 too, stream-K (42.9 us against 61.4 for 2 K splits).
  EXPECT_EQ(choose_ring_plan(288, 56, 32, 132).ring_warps, 16);
  EXPECT_EQ(choose_ring_plan(288, 56, 64, 132).ring_warps, 16);
  EXPECT_EQ(choose_ring_plan(56, 144, 32, 132).ring_warps, 8);
  const RingPlan down64 = choose_ring_plan(56, 144, 64, 132);
  EXPECT_EQ(down64.splits, 0);
  EXPECT_EQ(down64.ring_warps, 8);
  // Above 32 tokens, fewer than 2 x SMs / 8 row blocks (more than ~8 CTAs per
  // row block for one owner to sum) keep K splits: 8 blocks, K 65536.
  const RingPlan narrow64 = choose_ring_plan(8, 512, 64, 132);
  EXPECT_GT(narrow64.splits, 0);
  EXPECT_EQ(narrow64.ring_warps, 0);
  EXPECT_EQ(choose_ring_plan(8, 512, 32, 132).ring_warps, 8);
  // An odd block count past 2 x SMs: 8 consumer warps (no 256-row CTA).
  EXPECT_EQ(choose_ring_plan(265, 56, 32, 132).ring_warps, 8);
}

TEST(MoePrefillItems, WideGateUpItemsOnlyWhereMeasuredFaster) {
  constexpr long long kimi_experts = 384, kimi_topk = 8;
  auto kimi = [&](long long tokens) { return auto_gate_up_items(tokens * kimi_topk, kimi_experts); };
  EXPECT_EQ(kimi(8192), 2);  // 170.7 pairs per expert: measured faster
  EXPECT_EQ(kimi(4096), 1);  // 85: measured slower
  EXPECT_EQ(kimi(7680), 1);  // 160: not measured, stays on the old items
  EXPECT_EQ(kimi(12288), 2);  // 256: the upper bound, inclusive
  EXPECT_EQ(kimi(12289), 1);  // above: not measured
  // DeepSeek-V3 (256 experts, top-8) at 8192 tokens: 256 pairs per expert.
  EXPECT_EQ(auto_gate_up_items(8192 * 8, 256), 2);
  EXPECT_EQ(auto_gate_up_items(0, 384), 1);
}

TEST(MoePrefillChoices, AutoRunsTheAddersWideGateUpAndTwoGroupsDeep) {
  constexpr long long kimi_pairs = 8192LL * 8, kimi_experts = 384, kimi_out = 8192LL * 7168;
  const WsChoices c = resolve_ws_choices(WsRequest{}, kimi_pairs, kimi_experts, kimi_out);
  EXPECT_EQ(c.dequant, 1);
  EXPECT_EQ(c.epilogue, 5);
  EXPECT_TRUE(c.deep);
  EXPECT_TRUE(c.wide_gate_up);
  EXPECT_TRUE(c.rounds_y());
  EXPECT_FALSE(resolve_ws_choices(WsRequest{}, 2048LL * 8, kimi_experts, 2048LL * 7168).wide_gate_up);
}

TEST(MoePrefillChoices, AdderLimitFallsBackToFp32AddsUnlessForced) {
  constexpr int64_t limit = int64_t(1) << 32;  // the adders' 32-bit offsets into out
  EXPECT_EQ(resolve_ws_choices(WsRequest{}, 0, 1, limit - 1).epilogue, 5);
  const WsChoices past = resolve_ws_choices(WsRequest{}, 0, 1, limit);
  EXPECT_EQ(past.epilogue, 3);
  EXPECT_FALSE(past.rounds_y()) << "FP32 adds: the output keeps FP32 precision";
  // Forced, the adders stay (check_moe_prefill_ws refuses the call before any launch).
  EXPECT_EQ(resolve_ws_choices(WsRequest{0, 0, 4, 0}, 0, 1, limit).epilogue, 4);
  EXPECT_FALSE(adders_take(limit));
  EXPECT_TRUE(adders_take(limit - 1));
}

TEST(MoePrefillChoices, ForcedSettingsWinAndTheSsDownKeepsFp32) {
  const WsChoices ss = resolve_ws_choices(WsRequest{3, 0, 0, 1}, 8192LL * 8, 384, 1);
  EXPECT_EQ(ss.dequant, 3);
  EXPECT_FALSE(ss.wide_gate_up) << "the dequant warpgroup runs 256-row items";
  EXPECT_FALSE(ss.deep);
  EXPECT_FALSE(ss.rounds_y()) << "the SS down adds FP32 whatever ws_down_epilogue says";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{2, 0, 0, 0}, 8192LL * 8, 384, 1).wide_gate_up);
  EXPECT_TRUE(resolve_ws_choices(WsRequest{2, 0, 0, 0}, 8192LL * 8, 384, 1).rounds_y());
  for (int epilogue : {1, 2, 3}) EXPECT_FALSE(resolve_ws_choices(WsRequest{0, 0, epilogue, 0}, 0, 1, 1).rounds_y());
  EXPECT_TRUE(resolve_ws_choices(WsRequest{0, 2, 4, 0}, 0, 1, 1).wide_gate_up);
}

// 48-row B boxes go only to kernels that compile them: the wide gate_up, the
// RS kernels with one wgmma group in flight (the launchers of the others
// refuse them).
TEST(MoePrefillChoices, FineBoxesOnlyWhereTheKernelCompilesThem) {
  constexpr long long kimi = 384, wide_pairs = 8192LL * 8, narrow_pairs = 4096LL * 8;
  const WsChoices wide = resolve_ws_choices(WsRequest{}, wide_pairs, kimi, 1);
  EXPECT_TRUE(wide.fine_gate_up) << "auto: wide gate_up items";
  EXPECT_TRUE(wide.fine_down) << "auto: the adders with one wgmma group in flight";
  const WsChoices deep = resolve_ws_choices(WsRequest{}, narrow_pairs, kimi, 1);
  EXPECT_FALSE(deep.wide_gate_up);
  EXPECT_FALSE(deep.fine_gate_up) << "the 256-row gate_up keeps two groups in flight";
  EXPECT_TRUE(deep.fine_down);
  EXPECT_TRUE(resolve_ws_choices(WsRequest{0, 1, 0, 1}, narrow_pairs, kimi, 1).fine_gate_up);
  EXPECT_FALSE(resolve_ws_choices(WsRequest{0, 0, 4, 0}, wide_pairs, kimi, 1).fine_down) << "deep adders";
  const WsChoices ss = resolve_ws_choices(WsRequest{3, 0, 0, 1}, wide_pairs, kimi, 1);
  EXPECT_FALSE(ss.fine_gate_up);
  EXPECT_FALSE(ss.fine_down);
  EXPECT_TRUE(resolve_ws_choices(WsRequest{2, 0, 0, 0}, wide_pairs, kimi, 1).fine_down) << "RS down";
  const WsChoices coarse = resolve_ws_choices(WsRequest{0, 0, 0, 0, 1}, wide_pairs, kimi, 1);
  EXPECT_FALSE(coarse.fine_gate_up);
  EXPECT_FALSE(coarse.fine_down);
  EXPECT_FALSE(resolve_ws_choices(WsRequest{2, 0, 0, 1}, wide_pairs, kimi, 1).fine_gate_up) << "SS gate_up";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{0, 1, 0, 0}, wide_pairs, kimi, 1).fine_gate_up)
      << "256-row items forced, deep by default";
}

// gate_up's wgmma depth on the 256-row items: one group in flight (with the
// 48-row boxes) up to 48 pairs per expert on average, two above.
TEST(MoePrefillChoices, OneGroupInFlightUpToFortyEightPairsPerExpert) {
  const auto kimi = [](long long tokens) { return resolve_ws_choices(WsRequest{}, tokens * 8, 384, tokens * 7168); };
  EXPECT_FALSE(kimi(2048).deep) << "measured: one group 4-7% faster";
  EXPECT_TRUE(kimi(2048).fine_gate_up);
  EXPECT_FALSE(kimi(2304).deep) << "48 pairs per expert";
  EXPECT_TRUE(kimi(2305).deep);
  EXPECT_FALSE(kimi(2305).fine_gate_up);
  EXPECT_TRUE(kimi(4096).deep) << "measured: two groups 1-2% faster";
  EXPECT_EQ(auto_gate_up_depth(48 * 384, 384), 1);
  EXPECT_EQ(auto_gate_up_depth(48 * 384 + 1, 384), 2);
  EXPECT_TRUE(resolve_ws_choices(WsRequest{0, 0, 0, 2}, 2048LL * 8, 384, 1).deep) << "forced";
}

// Clusters of 2 CTAs sharing B (TMA multicast) only in the wide gate_up, the
// one kernel that has them (launch_gate_up_wide); auto there, forced 1 keeps
// each CTA on its own B.
TEST(MoePrefillChoices, WideGateUpSharesBInPairsOfCtas) {
  constexpr long long kimi = 384, wide_pairs = 8192LL * 8, narrow_pairs = 4096LL * 8;
  EXPECT_EQ(resolve_ws_choices(WsRequest{}, wide_pairs, kimi, 1).gate_up_cluster, 2) << "measured 3-5% faster";
  EXPECT_EQ(resolve_ws_choices(WsRequest{0, 0, 0, 0, 0, 1}, wide_pairs, kimi, 1).gate_up_cluster, 1) << "forced";
  EXPECT_EQ(resolve_ws_choices(WsRequest{}, narrow_pairs, kimi, 1).gate_up_cluster, 1) << "256-row items";
  EXPECT_EQ(resolve_ws_choices(WsRequest{0, 1, 0, 0, 0, 2}, wide_pairs, kimi, 1).gate_up_cluster, 1)
      << "forced 256-row items: the cluster setting is ignored";
  EXPECT_EQ(resolve_ws_choices(WsRequest{2, 0, 0, 0, 0, 2}, wide_pairs, kimi, 1).gate_up_cluster, 1) << "SS gate_up";
  EXPECT_EQ(resolve_ws_choices(WsRequest{0, 2, 0, 0, 0, 2}, narrow_pairs, kimi, 1).gate_up_cluster, 2)
      << "forced wide items";
}

// The wide gate_up's 224-pair tiles with second boxes of 32/48/64/96 rows
// (ws_box_rows 3, auto): only where the wide gate_up runs.
TEST(MoePrefillChoices, WideTilesOf224PairsOnlyInTheWideGateUp) {
  constexpr long long kimi = 384, wide_pairs = 8192LL * 8, narrow_pairs = 4096LL * 8;
  EXPECT_TRUE(resolve_ws_choices(WsRequest{}, wide_pairs, kimi, 1).tail96) << "auto";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{0, 0, 0, 0, 2}, wide_pairs, kimi, 1).tail96) << "48/64/128 forced";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{0, 0, 0, 0, 1}, wide_pairs, kimi, 1).tail96) << "64/128 forced";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{}, narrow_pairs, kimi, 1).tail96) << "256-row items";
  EXPECT_TRUE(resolve_ws_choices(WsRequest{0, 2, 0, 0, 3}, narrow_pairs, kimi, 1).tail96) << "forced wide items";
  EXPECT_FALSE(resolve_ws_choices(WsRequest{2, 0, 0, 0, 3}, wide_pairs, kimi, 1).tail96) << "SS gate_up";
  // Auto stops at 192 pairs per expert on average (experts past 224 would be
  // cut in two); forcing ws_box_rows 3 does not.
  constexpr long long at_limit = 192LL * kimi, past_limit = 193LL * kimi;
  EXPECT_TRUE(resolve_ws_choices(WsRequest{}, at_limit, kimi, 1).tail96) << "auto at 192 per expert";
  const WsChoices past = resolve_ws_choices(WsRequest{}, past_limit, kimi, 1);
  EXPECT_TRUE(past.wide_gate_up && past.fine_gate_up && !past.tail96) << "auto past 192: 256-pair tiles, fine boxes";
  EXPECT_TRUE(resolve_ws_choices(WsRequest{0, 0, 0, 0, 3}, 250LL * kimi, kimi, 1).tail96) << "forced at 250";
}

// down on the wide gate_up's items (ws_down_items 2, 3) only with the wide
// gate_up (its tile map), the MMA warps dequantizing and the adders with one
// wgmma group in flight (the one epilogue fused_moe_ws_wide.cu compiles);
// check_moe_prefill_ws refuses a forced one that does not fit.
TEST(MoePrefillChoices, WideDownOnlyBesideTheWideGateUpAndTheAdders) {
  constexpr long long kimi = 384, wide_pairs = 8192LL * 8, narrow_pairs = 4096LL * 8;
  constexpr int64_t past_adders = int64_t(1) << 32;
  const auto down = [&](WsRequest r, long long pairs = 8192LL * 8, int64_t out = 1) {
    return resolve_ws_choices(r, pairs, kimi, out);
  };
  const WsChoices own = down(WsRequest{0, 0, 0, 0, 0, 0, 2});
  EXPECT_TRUE(own.wide_down);
  EXPECT_EQ(own.down_cluster, 1);
  const WsChoices shared = down(WsRequest{0, 0, 0, 0, 0, 0, 3});
  EXPECT_TRUE(shared.wide_down);
  EXPECT_EQ(shared.down_cluster, 2);
  EXPECT_TRUE(shared.rounds_y()) << "the adders round y to BF16";
  const WsChoices automatic = down(WsRequest{});
  EXPECT_TRUE(automatic.wide_down) << "auto: measured 0.4-0.6 ms faster at 8192 Kimi tokens";
  EXPECT_EQ(automatic.down_cluster, 2);
  EXPECT_FALSE(down(WsRequest{}, narrow_pairs).wide_down) << "auto, 256-row gate_up";
  EXPECT_FALSE(down(WsRequest{0, 0, 0, 0, 0, 0, 1}).wide_down) << "256-row items forced";
  EXPECT_FALSE(down(WsRequest{0, 0, 0, 0, 0, 0, 3}, narrow_pairs).wide_down) << "256-row gate_up: no wide tile map";
  EXPECT_TRUE(down(WsRequest{0, 2, 0, 0, 0, 0, 3}, narrow_pairs).wide_down) << "wide gate_up forced";
  EXPECT_FALSE(down(WsRequest{0, 1, 0, 0, 0, 0, 2}).wide_down) << "256-row gate_up forced";
  EXPECT_FALSE(down(WsRequest{2, 0, 0, 0, 0, 0, 2}).wide_down) << "SS gate_up";
  for (int epilogue : {1, 2, 3, 4}) EXPECT_FALSE(down(WsRequest{0, 0, epilogue, 0, 0, 0, 2}).wide_down) << epilogue;
  EXPECT_TRUE(down(WsRequest{0, 0, 5, 0, 0, 0, 2}).wide_down);
  EXPECT_FALSE(down(WsRequest{0, 0, 0, 0, 0, 0, 2}, wide_pairs, past_adders).wide_down) << "auto's FP32 adds";
  EXPECT_EQ(down(WsRequest{0, 1, 0, 0, 0, 0, 3}).down_cluster, 1) << "not wide: no cluster";
  // The wide down reads its tiles as gate_up does: tail96 and its boxes follow gate_up's.
  EXPECT_TRUE(shared.tail96 && shared.fine_gate_up);
}

// Every setting the config checks accept: the kernel launch_moe_prefill_ws
// picks gets fine boxes exactly when it compiles them and ws_box_rows is not 1.
TEST(MoePrefillChoices, FineBoxesFollowTheLaunchedKernelForEverySetting) {
  constexpr int64_t past_adders = int64_t(1) << 32;
  for (int dequant = 0; dequant <= 3; ++dequant)
    for (int items = 0; items <= 2; ++items)
      for (int epilogue = 0; epilogue <= 5; ++epilogue)
        for (int depth = 0; depth <= 2; ++depth)
          for (int box = 0; box <= 3; ++box)
            for (int down_items = 0; down_items <= 3; ++down_items)
              for (long long pairs : {16LL * 384, 171LL * 384})
                for (int64_t out : {int64_t(1), past_adders}) {
                  if (items == 2 && dequant >= 2) continue;  // refused by the config checks
                  const WsChoices c = resolve_ws_choices(
                      WsRequest{dequant, items, epilogue, depth, box, 0, down_items}, pairs, 384, out);
                  // (check_moe_prefill_ws refuses a forced wide down that resolves to the 256-row items.)
                  // launch_moe_prefill_ws's dispatch: which kernel runs each GEMM.
                  enum Kernel { kWide, kSs, kDeep, kOneGroup };
                  const Kernel gate_up = c.wide_gate_up ? kWide : c.dequant >= 2 ? kSs : c.deep ? kDeep : kOneGroup;
                  const Kernel down = c.wide_down ? kWide : c.dequant == 3 ? kSs : c.epilogue == 4 ? kDeep : kOneGroup;
                  const bool asked = box != 1;
                  const bool gate_up_has = gate_up == kWide || gate_up == kOneGroup;
                  const bool down_has = down == kWide || down == kOneGroup;
                  // The boxes the launched down kernel reads (dn.fine_boxes).
                  const bool down_fine = c.down_boxes_fine();
                  std::string at;
                  for (long long v : {(long long)dequant, (long long)items, (long long)epilogue, (long long)depth,
                                      (long long)box, (long long)down_items, pairs, (long long)out})
                    at += std::to_string(v) + " ";
                  EXPECT_EQ(c.fine_gate_up, asked && gate_up_has) << at;
                  EXPECT_EQ(down_fine, asked && down_has) << at;
                  // The 224-pair tiles only in the wide kernels, which read them as fine boxes.
                  EXPECT_EQ(c.tail96, (box == 0 || box == 3) && gate_up == kWide) << at;
                  // down's wide items wherever they fit, unless the 256-row items are asked
                  // for: gate_up's tile map, the adders with one group in flight.
                  EXPECT_EQ(c.wide_down, down_items != 1 && gate_up == kWide && c.epilogue == 5) << at;
                  if (c.wide_down) EXPECT_TRUE(c.rounds_y()) << at;
                  EXPECT_EQ(c.down_cluster, c.wide_down && (down_items == 3 || down_items == 0) ? 2 : 1) << at;
                }
}

}  // namespace
}  // namespace mx::cuda
