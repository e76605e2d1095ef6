#!/usr/bin/env bash
# Session 18's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s18_call.sh 1 OUT_DIR OLD_BUNDLE   (new binaries on PATH: gpu_unbundle.sh)
#   bench/mxfp4/prefill_s18_call.sh 2 OUT_DIR
#   bench/mxfp4/prefill_s18_call.sh 3 OUT_DIR OLD_BUNDLE
#   bench/mxfp4/prefill_s18_call.sh 4 OUT_DIR OLD_BUNDLE
# Call 1: correctness of down on the wide items (ops_parity --forced-only: MoeConfig::ws_down_items 2
# and 3 on every wide tile shape) and, at 8192 Kimi tokens, three runs of: OLD_BUNDLE's mxfp4_bench
# (session 17's kernels: every thread of gate_up zeroes `out` before the K loops) auto rows, then
# this build's auto rows (gate_up's idle producer warps zero `out`) and its wide-down rows (ws_down_items
# 2: B per CTA, 3: 2-CTA clusters sharing B), W4A16 and W4A4 each.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 1|2|3|4 OUT_DIR [OLD_BUNDLE]" >&2; exit 2; }
call=$1 out=$2 old_bundle=${3:-}
source bench/mxfp4/prefill_call_common.sh
# ops_parity's forced-kernel cases (among them path 5's forced ws_down_items), lines matching $1 shown.
forced_parity() {
  timeout 200 ops_parity --forced-only > "$out/ops_parity_forced.txt" 2>&1
  echo "ops_parity --forced-only: exit $?"
  grep -E "$1" "$out/ops_parity_forced.txt" | cut -c1-220 | tail -20
}
# OLD_BUNDLE unpacked into /tmp/old (its mxfp4_bench beside this build's).
unpack_old() { mkdir -p /tmp/old && xz -dc "$old_bundle" | tar -C /tmp/old -xf -; }
# N alternating runs at T tokens: OLD_BUNDLE's rows matching OLD_FILTER into OLD_NAME<run>, then this
# build's matching NEW_FILTER into NEW_NAME<run>. (Call 4's 2048-token files were committed without the
# run number.)
old_new_runs() {
  local n=$1 tokens=$2 old_filter=$3 new_filter=$4 old_name=$5 new_name=$6 r
  for r in $(seq "$n"); do
    bench=/tmp/old/bin/mxfp4_bench rows "$old_name$r" --moe-tokens "$tokens" --moe-only "$old_filter"
    rows "$new_name$r" --moe-tokens "$tokens" --moe-only "$new_filter"
  done
}
case $call in
  1)
    forced_parity "FAIL|wide items|passed|failed"
    unpack_old
    old_new_runs 3 8192 "auto" "=auto|down on the wide items" old-auto- new-
    ;;
  2)
    # Auto now runs down on the wide items on 2-CTA clusters: ops_parity's forced cases again, then at
    # 8192 tokens (twice) auto beside down on the 256-row items (auto before), B per CTA and 4-CTA
    # clusters; at 10240 tokens (213 pairs per expert: the 256-pair tiles) auto beside the 256-row down.
    forced_parity "FAIL|op cases"
    repeat_rows 2 t8192 --moe-tokens 8192 --moe-only "=auto|down on"
    rows t10240 --moe-tokens 10240 --moe-only "=auto|down on"
    ;;
  3)
    # The wide gate_up's h copied out by the producer warpgroup's warps 1..3 (HCopyOut) instead of the
    # MMA warps after a CTA barrier: ops_parity's forced cases, then three alternating runs at 8192 tokens
    # of OLD_BUNDLE's auto rows (the build before) and this build's.
    forced_parity "FAIL|op cases"
    unpack_old
    old_new_runs 3 8192 "=auto" "=auto" old-auto- new-auto-
    ;;
  4)
    # The gather with whole rows per load instruction (8 lanes per row, a padded shared area per warp)
    # against OLD_BUNDLE (a row per thread): ops_parity's forced cases, then alternating auto rows at 8192
    # tokens (three runs) and 2048 tokens (one run).
    forced_parity "FAIL|op cases"
    unpack_old
    old_new_runs 3 8192 "=auto" "=auto" old-auto- new-auto-
    old_new_runs 1 2048 "=auto" "=auto" old-auto-t2048- new-auto-t2048-
    ;;
  *) echo "usage: $0 1|2|3|4 OUT_DIR [OLD_BUNDLE]" >&2; exit 2 ;;
esac
