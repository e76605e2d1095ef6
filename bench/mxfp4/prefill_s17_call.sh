#!/usr/bin/env bash
# Session 17's device call for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s17_call.sh 1|2|4 OUT_DIR   (binaries on PATH: gpu_unbundle.sh), after scripts/gpu_all.sh
# Call 1: the wide gate_up on tiles of up to 224 pairs, its second B box 32/48/64/96 rows
# (MoeConfig::ws_box_rows 3, auto in that build) beside tiles of 256 pairs with boxes of 48/64/128 rows
# (ws_box_rows 2, auto before): 2048 tokens once, 8192 tokens three times (both settings in each run). The
# filter "auto" also matches every older "(auto before ...)" row.
# Call 2: the 8192-token auto rows once (W4A16 and W4A4; the filter takes the older "auto before" rows
# too) with nvidia-smi sampling the SM clock, power draw and the active clock-throttle reasons every 100 ms
# into $out/smi.csv (what holds the clock during the prefill).
# Call 4 (after the final run; mxfp4_bench only): auto's limit for the 224-pair tiles (192 pairs per expert on
# average): at 10240, 11264 and 12288 tokens (213, 235, 256 pairs per expert) the 224-pair tiles forced
# (ws_box_rows 3) beside the 256-pair tiles (ws_box_rows 2, what auto runs there).
set -uo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 1|2|4 OUT_DIR" >&2; exit 2; }
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
case $call in
  1)
    rows t2048 --moe-tokens 2048 --moe-only "auto|256 pairs"
    repeat_rows 3 t8192 --moe-tokens 8192 --moe-only "auto|256 pairs"
    ;;
  2)
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv -lms 100 > "$out/smi.csv" 2>&1 &
    smi=$!
    rows t8192-auto --moe-tokens 8192 --moe-only "auto"
    kill "$smi"
    ;;
  4)
    for t in 10240 11264 12288; do
      rows "t$t" --moe-tokens "$t" --moe-only "224 pairs forced|boxes 48/64/128"
    done
    ;;
  *) echo "usage: $0 1|2|4 OUT_DIR" >&2; exit 2 ;;
esac
