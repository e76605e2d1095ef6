#!/usr/bin/env bash
# Session 25's calls: the stream-K early sums (streamk_sums_early) against the
# previous binary in one call. Each bundle's mxfp4_bench --dense-fp8 (W4A4 on
# the dense shapes: the qdq + BF16 kernels, the FP8 ring and its probes), then
# the new one's --dense (W4A16 ring rows) and ops_parity --ops-only:
#   bench/mxfp4/s25_call.sh OUT_DIR OLD_BUNDLE NEW_BUNDLE [dense|nodense]
set -uo pipefail
out=$1 old=$2 new=$3 dense=${4:-dense}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader > "$out/gpu.txt" 2>&1
summary() {
  python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if not r.get("us") or "graph" not in r.get("note", ""): continue
    if not r["shape"].startswith(("dense_gate_up", "dense_down")): continue
    print(f'{r["shape"][:24]:24} M={r["M"]:<3} {r["note"][:58]:58} {r["us"]:6.1f} {r["us"] / r["floor_us"]:5.2f}x err {r.get("rel_err", -1):.1e} {r.get("sm_mhz") or 0:.0f} MHz')
PY
}
for round in 1 2; do
  for which in old new; do
    bundle=$old; [[ $which == new ]] && bundle=$new
    rm -rf /tmp/mxbundle; source scripts/gpu_unbundle.sh "$bundle"
    echo "=== $(date -u +%T) round $round $which ($bundle)"
    timeout 240 mxfp4_bench --dense-fp8 --json "$out/fp8-$which-$round.jsonl" > "$out/fp8-$which-$round.txt" 2>&1
    echo "bench exit $?"
  done
done
for which in old new; do echo "=== $which"; for round in 1 2; do summary "$out/fp8-$which-$round.jsonl"; done; done
if [[ $dense == dense ]]; then
  echo "=== $(date -u +%T) new --dense"
  timeout 300 mxfp4_bench --dense --json "$out/dense-new.jsonl" > "$out/dense-new.txt" 2>&1; echo "dense exit $?"
  summary "$out/dense-new.jsonl" | grep -v PROBE
fi
echo "=== $(date -u +%T) new ops_parity --ops-only"
timeout 200 ops_parity --ops-only > "$out/ops_parity.txt" 2>&1; echo "ops_parity exit $?"
tail -2 "$out/ops_parity.txt"
echo "=== $(date -u +%T) done"
