#!/usr/bin/env bash
# Session 14's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s14_call.sh 1|2|3|4|5|6 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: partial pair tiles of <= 48 pairs in 48-row B boxes with wgmma n = 48 (auto; MoeConfig::ws_box_rows
# 2) beside 64-row boxes (ws_box_rows 1, auto before), W4A16 and W4A4, every row checked against the
# reference, at 512 and 2048 tokens once and at 8192 tokens three times; the 3-CTA rows at 512 tokens run
# the 48-row boxes across many items per CTA.
# Call 2: the phases around the GEMMs, build B (mxfp4_bench) against build A (mxfp4_bench_a, call 1's
# binary): the router's id loads batched 8 per thread, the gather in CTAs of 256 rows x one K tile (4 KB
# store runs), gate_up's zeroing of out moved onto the producer warpgroup's idle warps. B at 512 and
# 2048 tokens (3-CTA rows included), then A and B alternating three times at 8192 tokens. Kept: the
# gather (424-427 vs 436-437 us W4A16, 361-370 vs 391-393 W4A4); the router (99-101 vs 100-101 us) and
# the zeroing (gate_up 7071-7201 vs 7013-7073 us) gained nothing and were reverted (not in the tree).
# Call 3: after the review (host checks in place of the deep kernels' trap, the wide kernel's first box a
# constant, the gather's dead K-tile check gone) and W4A4's h quantizer (qdq_chunks_kernel) in the gather's
# CTA shape: build B (mxfp4_bench) at 512 and 2048 tokens and ops_parity, then A (mxfp4_bench_a, the final
# run's 42f647a) and B alternating twice at 8192 tokens. B correct (ops_parity 217 op + 84 model cases,
# every bench row within its bound, 3-CTA rows 1.2e-8..1.4e-8 of one CTA per SM); times equal within the
# spread (W4A16 11.09 / 11.26 vs 11.23 / 11.12 ms, W4A4 10.85 / 10.88 vs 10.83 / 10.78), so the
# quantizer's CTA shape was reverted (not in the tree); the rest is the tree's code.
# Call 4: ncu's throughput sections (speed of light, compute, memory) of one launch each of the wide gate_up
# and of down at 8192 tokens with the 48-row boxes (where the time goes now), key rows printed.
# Call 5: gate_up on 256-row items with one wgmma group in flight (which takes the 48-row boxes; the
# two-group kernel, auto below 170 pairs per expert, does not) beside auto, at 2048 and 4096 tokens twice
# and at 8192 tokens twice.
# Call 6: the auto rule that follows from call 5 (one group in flight up to 48 pairs per expert): ops_parity
# and the bench's rows at 512 (3-CTA rows included) and 2048 tokens. (Since the review after the session the
# bench runs the "one group in flight" row from 4096 tokens only: below, auto is that configuration.)
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
case $call in
  1)
    rows t512 --moe-tokens 512 --moe-only "auto|B boxes|3 CTAs"
    rows t2048 --moe-tokens 2048 --moe-only "auto|B boxes"
    for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|B boxes"; done
    ;;
  2)
    rows t512 --moe-tokens 512 --moe-only "auto|3 CTAs"
    rows t2048 --moe-tokens 2048 --moe-only "auto"
    for r in 1 2 3; do
      bench=mxfp4_bench_a rows "t8192-a$r" --moe-tokens 8192 --moe-only "auto"
      rows "t8192-b$r" --moe-tokens 8192 --moe-only "auto"
    done
    ;;
  3)
    rows t512 --moe-tokens 512 --moe-only "auto|3 CTAs"
    rows t2048 --moe-tokens 2048 --moe-only "auto"
    timeout 200 ops_parity > "$out/ops_parity.txt" 2>&1; echo "ops_parity rc $?"; tail -2 "$out/ops_parity.txt"
    for r in 1 2; do
      bench=mxfp4_bench_a rows "t8192-a$r" --moe-tokens 8192 --moe-only "auto"
      rows "t8192-b$r" --moe-tokens 8192 --moe-only "auto"
    done
    ;;
  4)
    for k in "gu moe_ws_wide" "dn moe_ws_kernel"; do
      set -- $k
      timeout 200 ncu --clock-control none -k "regex:$2" --launch-count 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
        -o "$out/$1" -f mxfp4_bench --moe-prefill --moe-tokens 8192 --moe-only "auto" > "$out/$1-run.txt" 2>&1 ||
        echo "ncu $1: exit $?"
      ncu --import "$out/$1.ncu-rep" --page details > "$out/$1-details.txt" 2>&1
      echo "== $1"
      grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|L1/TEX Cache Throughput|Executed Ipc Active|Issue Slots Busy|highest-utilized" \
        "$out/$1-details.txt" | cut -c1-150 | head -14
      rm -f "$out/$1.ncu-rep"  # the device tool brings back a few files only
    done
    ;;
  5)
    for r in 1 2; do
      for t in 2048 4096 8192; do rows "t$t-$r" --moe-tokens $t --moe-only "auto|one group in flight"; done
    done
    ;;
  6)
    timeout 200 ops_parity > "$out/ops_parity.txt" 2>&1; echo "ops_parity rc $?"; tail -2 "$out/ops_parity.txt"
    rows t512 --moe-tokens 512 --moe-only "auto|3 CTAs|one group in flight"
    rows t2048 --moe-tokens 2048 --moe-only "auto|one group in flight"
    ;;
  *) echo "usage: $0 1|2|3|4|5|6 OUT_DIR" >&2; exit 2 ;;
esac
