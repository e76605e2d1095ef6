#!/usr/bin/env bash
# Session 16's device calls for the MoE prefill (path 5), reproducible from the repository with the call's
# patch applied (below), each after scripts/gpu_all.sh in the same call:
#   bench/mxfp4/prefill_s16_call.sh 1|2|3 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# The --moe-only filters below match every path-5 row whose label says "(auto before ...)" too, so each
# run also times the older settings beside the two named.
# Call 1: the wide gate_up's pairs past the first 128 in B boxes of 8-row steps, multiplied as guarded
# wgmma pieces of 64/32/16/8 columns (MoeConfig::ws_box_rows 3, auto in that build) beside boxes of
# 48/64/128 rows (ws_box_rows 2, auto before), W4A16 and W4A4, every row checked against the reference:
# 2048 tokens once, 8192 tokens three times (both settings in each run).
# Call 2: the gather fused into the wide gate_up (MoeConfig::ws_gather 2, auto in that build: x permuted in
# place of the gather pass, each pair's row copied by its own 128-byte TMA, 128-byte swizzled) beside B from
# the gather pass (ws_gather 1): 512 tokens once (the wide items forced, the 3-CTA row: one 2-CTA cluster over
# many items), 8192 tokens three times.
# Call 3: the gather pass with 4 K tiles per thread (the next tile's loads before this one's stores), every
# path-5 row at 8192 tokens twice (all of them run the new gather: compared with calls 1-2 across calls);
# the same call ran an ops_parity built with router-broken-on-purpose.patch, and scripts/gpu_issue8.sh.
# What calls 1-3 measured was reverted: call 1 runs with raw-prefill-2026-12-02-s16/
# wide-step-boxes-guarded-pieces-measured-slower.patch applied, call 2 with
# wide-b-rows-by-tma-measured-slower.patch (its "gather pass" rows), call 3 with
# gather-4-tiles-per-thread-measured-no-gain.patch.
set -uo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 1|2|3 OUT_DIR" >&2; exit 2; }
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
case $call in
  1)
    rows t2048 --moe-tokens 2048 --moe-only "auto|48/64/128"
    repeat_rows 3 t8192 --moe-tokens 8192 --moe-only "auto|48/64/128"
    ;;
  2)
    rows t512 --moe-tokens 512 --moe-only "3 CTAs|gather pass|128 rows x 256 pairs"
    repeat_rows 3 t8192 --moe-tokens 8192 --moe-only "auto|gather pass"
    ;;
  3)
    repeat_rows 2 t8192 --moe-tokens 8192 --moe-only "auto"
    ;;
  *) echo "usage: $0 1|2|3 OUT_DIR" >&2; exit 2 ;;
esac
