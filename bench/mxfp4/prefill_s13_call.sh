#!/usr/bin/env bash
# Session 13's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s13_call.sh 1|2|3|4|5|6|7 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Calls 1, 2, 3, 5, 6: a variant beside auto, every row checked against the reference, at 512 and 2048
# tokens once and at 8192 tokens three times (the rows of one run are measured one after another, so three
# runs show the spread). Calls 2, 3, 5 and 6 ran a build with the patch named below (in
# bench/mxfp4/raw-prefill-2026-12-02-s13/); their variants are not in the tree.
#   1: down's epilogue on the producer warpgroup's adder warps (MoeConfig::ws_down_epilogue 5, since auto;
#      4: two wgmma groups in flight) beside auto (3 then: the MMA warps' deferred FP32 atomics);
#   2: down on wide items (128 rows x up to 256 pairs, ws_down_epilogue 6) with the adders, beside auto (5)
#      and 3 (wide-down-adders-measured-slower.patch);
#   3: the wide gate_up's h copied out by the producer warpgroup (ws_gate_up_epilogue 2) beside the MMA
#      warps (gate-up-h-copiers-measured-slower.patch);
#   5: L2 cache policies on path 5's copies (ws_l2_hints 2: weight tiles evict_first, B evict_last)
#      (l2-cache-hints-measured-no-change.patch);
#   6: each item's K loop started at K tile rb * KT / row blocks (ws_k_rotation 2), so that a tile's row
#      blocks, which run side by side, do not all ask for the same B tile at once
#      (k-rotation-per-row-block-measured-no-gain.patch).
# Call 4: where path 5 (with the adders) overtakes the routed decode path: auto (routed below 1536 tokens
# then) beside path 5 forced, 256..1536 tokens, two rounds; then ncu's stall sampling of down (the adders'
# kernel) at 8192 tokens.
# Call 7: ncu's throughput, compute and memory sections of one wide gate_up launch at 8192 tokens (is shared
# memory what its stages wait for?), the rows about shared memory and the tensor pipe printed.
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
sizes() {  # sizes FILTER: the rows matching FILTER at 512, 2048 and three times at 8192 tokens
  rows t512 --moe-tokens 512 --moe-only "$1"
  rows t2048 --moe-tokens 2048 --moe-only "$1"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "$1"; done
}
case $call in
  1) sizes "auto|adder" ;;
  2) sizes "auto|adder|3/4" ;;
  3) sizes "auto|copied" ;;
  4)
    for r in 1 2; do
      for t in 256 384 512 768 1024 1536; do
        rows "t$t-$r" --moe-tokens $t --moe-only "auto|prefill on wgmma, warp-specialized"
      done
    done
    stalls down moe_ws_kernel "auto"
    ;;
  5) sizes "auto|L2 hints" ;;
  6) sizes "auto|K rotated" ;;
  7)
    timeout 200 ncu --clock-control none -k "regex:moe_ws_wide" --launch-count 1 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      -o "$out/gu" -f mxfp4_bench --moe-prefill --moe-tokens 8192 --moe-only "auto" > "$out/gu-run.txt" 2>&1 ||
      echo "ncu gu: exit $?"
    ncu --import "$out/gu.ncu-rep" --page details > "$out/gu-details.txt" 2>&1
    ncu --import "$out/gu.ncu-rep" --page raw > "$out/gu-raw.txt" 2>&1
    grep -iE "shared|gmma|tensor|bank|wavefront|duration|frequency" "$out/gu-raw.txt" | head -80
    rm -f "$out/gu.ncu-rep"  # the device tool brings back a few files only
    xz -f "$out/gu-raw.txt"
    ;;
  *) echo "usage: $0 1|2|3|4|5|6|7 OUT_DIR" >&2; exit 2 ;;
esac
