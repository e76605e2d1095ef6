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
[[ $# -ge 2 ]] || { echo "usage: $0 1 OUT_DIR [OLD_BUNDLE]" >&2; exit 2; }
call=$1 out=$2 old_bundle=${3:-}
source bench/mxfp4/prefill_call_common.sh
case $call in
  1)
    timeout 200 ops_parity --forced-only > "$out/ops_parity_forced.txt" 2>&1
    echo "ops_parity --forced-only: exit $?"
    grep -E "FAIL|wide items|passed|failed" "$out/ops_parity_forced.txt" | cut -c1-220 | tail -20
    mkdir -p /tmp/old && xz -dc "$old_bundle" | tar -C /tmp/old -xf -
    for r in 1 2 3; do
      bench=/tmp/old/bin/mxfp4_bench rows "old-auto-$r" --moe-tokens 8192 --moe-only "auto"
      rows "new-$r" --moe-tokens 8192 --moe-only "=auto|down on the wide items"
    done
    ;;
  2)
    # Auto now runs down on the wide items on 2-CTA clusters: ops_parity's forced cases again, then at
    # 8192 tokens (twice) auto beside down on the 256-row items (auto before), B per CTA and 4-CTA
    # clusters; at 10240 tokens (213 pairs per expert: the 256-pair tiles) auto beside the 256-row down.
    timeout 200 ops_parity --forced-only > "$out/ops_parity_forced.txt" 2>&1
    echo "ops_parity --forced-only: exit $?"
    grep -E "FAIL|op cases" "$out/ops_parity_forced.txt" | cut -c1-220 | tail -5
    repeat_rows 2 t8192 --moe-tokens 8192 --moe-only "=auto|down on"
    rows t10240 --moe-tokens 10240 --moe-only "=auto|down on"
    ;;
  3)
    # The wide gate_up's h copied out by the producer warpgroup's warps 1..3 (HCopyOut) instead of the
    # MMA warps after a CTA barrier: ops_parity's forced cases, then three alternating runs at 8192 tokens
    # of OLD_BUNDLE's auto rows (the build before) and this build's.
    timeout 200 ops_parity --forced-only > "$out/ops_parity_forced.txt" 2>&1
    echo "ops_parity --forced-only: exit $?"
    grep -E "FAIL|op cases" "$out/ops_parity_forced.txt" | cut -c1-220 | tail -5
    mkdir -p /tmp/old && xz -dc "$old_bundle" | tar -C /tmp/old -xf -
    for r in 1 2 3; do
      bench=/tmp/old/bin/mxfp4_bench rows "old-auto-$r" --moe-tokens 8192 --moe-only "=auto"
      rows "new-auto-$r" --moe-tokens 8192 --moe-only "=auto"
    done
    ;;
  4)
    # The gather with whole rows per load instruction (8 lanes per row, a padded shared area per warp)
    # against OLD_BUNDLE (a row per thread): ops_parity's forced cases, then alternating auto rows at 8192
    # tokens (three runs) and 2048 tokens (one run).
    timeout 200 ops_parity --forced-only > "$out/ops_parity_forced.txt" 2>&1
    echo "ops_parity --forced-only: exit $?"
    grep -E "FAIL|op cases" "$out/ops_parity_forced.txt" | cut -c1-220 | tail -5
    mkdir -p /tmp/old && xz -dc "$old_bundle" | tar -C /tmp/old -xf -
    for r in 1 2 3; do
      bench=/tmp/old/bin/mxfp4_bench rows "old-auto-$r" --moe-tokens 8192 --moe-only "=auto"
      rows "new-auto-$r" --moe-tokens 8192 --moe-only "=auto"
    done
    bench=/tmp/old/bin/mxfp4_bench rows "old-auto-t2048" --moe-tokens 2048 --moe-only "=auto"
    rows "new-auto-t2048" --moe-tokens 2048 --moe-only "=auto"
    ;;
  *) echo "usage: $0 1 OUT_DIR [OLD_BUNDLE]" >&2; exit 2 ;;
esac
