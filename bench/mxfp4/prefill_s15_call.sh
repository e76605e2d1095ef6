#!/usr/bin/env bash
# Session 15's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s15_call.sh 1|2|3 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: the wide gate_up with B shared by 2-CTA clusters through TMA multicast (then
# MoeConfig::ws_b_multicast 2, now ws_gate_up_cluster 2: each CTA copies half of every B stage into both) beside auto, W4A16 and W4A4, every row checked
# against the reference: 512 tokens once (the wide items forced; the 3-CTA row runs one cluster of 2 over
# many items), 8192 tokens three times; then ncu's stall sampling of one launch of the multicast kernel.
# Call 2: B multicast to clusters of 2 and 4 CTAs (ws_gate_up_cluster 2, 4: each CTA copies 8 / n of the 8
# chunks) in the wide gate_up alone and with down's too (ws_down_cluster), beside auto; 512 tokens once
# (the 3-CTA row runs one cluster of 2 in both GEMMs over many items), 8192 three times.
# Call 3: build B (mxfp4_bench, ops_parity) = the multi-CTA router (moe_route_blocks: 3 launches from 8192
# pairs) + W4A4's quantizers fused (x in the gather, h in gate_up's copy-out) against build A (mxfp4_bench_a:
# 9552969, 2-CTA clusters auto): B at 2048 tokens, then A and B alternating twice at 8192 tokens. Run in
# the session's final call after scripts/gpu_all.sh (whose ops_parity runs the new router in its
# 2048-token path-5 case and the fused quantizers in its W4A4 cases) and before scripts/gpu_issue8.sh.
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
case $call in
  1)
    rows t512 --moe-tokens 512 --moe-only "auto|multicast|3 CTAs"
    repeat_rows 3 t8192 --moe-tokens 8192 --moe-only "auto|multicast"
    stalls mc moe_ws_wide "multicast to 2-CTA"
    ;;
  2)
    rows t512 --moe-tokens 512 --moe-only "auto|multicast|3 CTAs"
    repeat_rows 3 t8192 --moe-tokens 8192 --moe-only "auto|multicast"
    ;;
  3)
    rows t2048 --moe-tokens 2048 --moe-only "auto"
    for r in 1 2; do
      bench=mxfp4_bench_a rows "t8192-a$r" --moe-tokens 8192 --moe-only "auto"
      rows "t8192-b$r" --moe-tokens 8192 --moe-only "auto"
    done
    ;;
  *) echo "usage: $0 1|2|3 OUT_DIR" >&2; exit 2 ;;
esac
