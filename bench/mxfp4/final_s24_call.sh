#!/usr/bin/env bash
# Session 24's last call: ops_parity whole (ops and the golden models), a W4A4
# synthetic Kimi model greedy on the CPU, on CUDA with BF16 MMAs and with
# --w4a4-mma fp8 (a 40-token prompt: its prefill runs the dense FP8 path on
# the layer-0 MLP and the shared expert), and the W4A16 dense rows (--dense):
#   bench/mxfp4/final_s24_call.sh OUT_DIR   (bundle unpacked: mxserve, ops_parity, mxfp4_bench on PATH)
set -uo pipefail
out=$1
mkdir -p "$out"
timeout 240 ops_parity --golden tests/golden > "$out/ops_parity.txt" 2>&1; echo "ops_parity exit $?"
tail -2 "$out/ops_parity.txt"
mxserve synth --out /tmp/kimi-w4a4 --preset kimi-k25-mxfp4 --seed 7 > /dev/null
ids=$(seq -s, 3 42)
for run in "cpu" "cuda" "cuda --w4a4-mma fp8"; do
  # shellcheck disable=SC2086
  echo "$run: $(mxserve generate --model /tmp/kimi-w4a4 --w4a4 --device $run --prompt-ids "$ids" --max-tokens 12 2>"$out/gen-${run// /_}.err" | head -1)"
done | tee "$out/generate.txt"
grep -h "FP8\|warn" "$out"/gen-*.err | head -5
timeout 300 mxfp4_bench --dense --json "$out/dense.jsonl" > "$out/dense.txt" 2>&1; echo "dense exit $?"
python3 - "$out/dense.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("us") and r.get("M") and ("auto" in r["note"] or "graph" in r["note"].lower()) and "PROBE" not in r["note"]:
        print(f'{r["shape"][:24]:24} M={r["M"]:<3} {r["note"][:60]:60} {r["us"]:7.1f} {r["ratio"]:5.2f}x err {r["rel_err"]:.1e}')
PY
