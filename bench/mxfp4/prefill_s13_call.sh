#!/usr/bin/env bash
# Session 13's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s13_call.sh 1|2|3|4|5|6 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 2: down on wide items (128 rows x up to 256 pairs, ws_down_epilogue 6)
# with the adders, beside auto (5) and 3, the same sizes (code: the patch
# raw-prefill-2026-12-02-s13/wide-down-adders-measured-slower.patch).
# Call 3: the wide gate_up's h copied out by the producer warpgroup
# (ws_gate_up_epilogue 2) beside the MMA warps (1 = auto), same sizes (code:
# raw-prefill-2026-12-02-s13/gate-up-h-copiers-measured-slower.patch).
# Call 4: where path 5 (with the adders) overtakes the routed decode path:
# auto beside path 5 forced, 256..1536 tokens, two rounds; then ncu's stall
# sampling of down (the adders' kernel) at 8192 tokens.
# Call 5: L2 cache policies on path 5's copies (ws_l2_hints 2: weight tiles
# evict_first, B evict_last) beside auto (none; code: the patch
# raw-prefill-2026-12-02-s13/l2-cache-hints-measured-no-change.patch).
# Call 6: each item's K loop started at K tile rb * KT / row blocks (wrapping;
# ws_k_rotation 2), so that a tile's row blocks, which run side by side, do not
# all ask for the same B tile at once, beside auto (code: the patch
# raw-prefill-2026-12-02-s13/k-rotation-per-row-block-measured-no-gain.patch).
# Call 1: down's epilogue on the producer warpgroup's adder warps
# (MoeConfig::ws_down_epilogue 4: wgmma groups 2 deep, 5: 1 deep) beside auto
# (3: the MMA warps' deferred FP32 atomics): every row checked against the
# reference at 512 (3-CTA row included) and 2048 tokens, then 8192 tokens three
# times (the rows of one run are measured one after another, so three runs show
# the spread), then ncu's stall sampling of the new down kernel.
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
rows() {  # rows NAME ARGS...: mxfp4_bench --moe-prefill ARGS, MoE rows (no graph rows), short columns
  local name=$1
  shift
  timeout 150 mxfp4_bench --moe-prefill --json "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?"
  grep -E '^\| fused_moe' "$out/$name.log" | grep -v "CUDA graph" | cut -d'|' -f4,5,6,8,9,10,11,12 |
    sed -E "s/err on 32 tokens, phases us \(median of 10\)://" | cut -c1-230
}
if [[ $call == 1 ]]; then
  rows t512 --moe-tokens 512 --moe-only "auto|adder"
  rows t2048 --moe-tokens 2048 --moe-only "auto|adder"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|adder"; done
elif [[ $call == 2 ]]; then
  rows t512 --moe-tokens 512 --moe-only "auto|adder|3/4"
  rows t2048 --moe-tokens 2048 --moe-only "auto|adder|3/4"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|adder|3/4"; done
elif [[ $call == 4 ]]; then
  for r in 1 2; do
    for t in 256 384 512 768 1024 1536; do rows "t$t-$r" --moe-tokens $t --moe-only "auto|prefill on wgmma, warp-specialized"; done
  done
  stalls down moe_ws_kernel "auto"
elif [[ $call == 5 ]]; then
  rows t512 --moe-tokens 512 --moe-only "auto|L2 hints"
  rows t2048 --moe-tokens 2048 --moe-only "auto|L2 hints"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|L2 hints"; done
elif [[ $call == 6 ]]; then
  rows t512 --moe-tokens 512 --moe-only "auto|K rotated"
  rows t2048 --moe-tokens 2048 --moe-only "auto|K rotated"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|K rotated"; done
elif [[ $call == 3 ]]; then
  rows t512 --moe-tokens 512 --moe-only "auto|copied"
  rows t2048 --moe-tokens 2048 --moe-only "auto|copied"
  for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|copied"; done
fi
