#!/usr/bin/env bash
# Session 14's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s14_call.sh 1 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: partial pair tiles of <= 48 pairs in 48-row B boxes with wgmma n = 48 (auto; MoeConfig::ws_box_rows
# 2) beside 64-row boxes (ws_box_rows 1, auto before), W4A16 and W4A4, every row checked against the
# reference, at 512 and 2048 tokens once and at 8192 tokens three times; the 3-CTA rows at 512 tokens run
# the 48-row boxes across many items per CTA.
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
case $call in
  1)
    rows t512 --moe-tokens 512 --moe-only "auto|B boxes|3 CTAs"
    rows t2048 --moe-tokens 2048 --moe-only "auto|B boxes"
    for r in 1 2 3; do rows "t8192-$r" --moe-tokens 8192 --moe-only "auto|B boxes"; done
    ;;
  *) echo "usage: $0 1 OUT_DIR" >&2; exit 2 ;;
esac
