#!/usr/bin/env bash
# Session 24's calls: W4A4 on the dense shapes, auto (the qdq, then the BF16
# kernels) beside the FP8 ring kernel (GemmConfig::fp8), events and graphs,
# every row checked against the FP32 reference of the W4A4 contract:
#   bench/mxfp4/fp8_dense_s24_call.sh MXFP4_BENCH OUT_DIR [extra bench flags]
set -uo pipefail
bench=$1 out=$2; shift 2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader > "$out/gpu.txt" 2>&1
timeout 500 "$bench" --dense-fp8 --json "$out/dense-fp8.jsonl" "$@" > "$out/dense-fp8.txt" 2>&1
echo "bench exit $?"
python3 - "$out/dense-fp8.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "us" not in r or not r.get("us"): continue
    ratio = r["us"] / r["floor_us"] if r.get("floor_us") else 0
    print(f'{r["shape"][:26]:26} M={r["M"]:<3} {r["note"][:70]:70} {r["us"]:8.1f} us {ratio:5.2f}x err {r.get("rel_err", -1):.2e} unwritten {r.get("unwritten")} {r.get("sm_mhz"):.0f} MHz')
PY
