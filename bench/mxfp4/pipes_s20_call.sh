#!/usr/bin/env bash
# Session 20's first device call: which pipe sets the dense kernels' rate at 8-64 tokens.
#   bench/mxfp4/pipes_s20_call.sh OUT_DIR      (mxfp4_bench on PATH: scripts/gpu_unbundle.sh)
# 1. mxfp4_bench --mma-rates: mma.sync, wgmma RS (n 16..128) and the dequant's instructions alone.
# 2. ncu (ComputeWorkloadAnalysis: per-pipe utilization; WarpStateStats; SpeedOfLight) of the automatic
#    kernels at 8 / 16 tokens (--profile --dense-small) and of the ring kernel at 32 / 64 (--profile --dense).
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv | tee "$out/gpu.txt"
timeout 150 mxfp4_bench --mma-rates --json "$out/rates.jsonl" > "$out/rates.log" 2>&1 || echo "rates: exit $?"
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
          --section Occupancy --section LaunchStats)
prof() {  # prof NAME FLAG REGEX
  timeout 200 ncu --clock-control none -k "regex:$3" "${sections[@]}" -o "$out/$1" -f \
    mxfp4_bench --profile "$2" > "$out/$1.log" 2>&1 || echo "ncu $1: exit $?"
  ncu --import "$out/$1.ncu-rep" --page details > "$out/$1-details.txt" 2>&1
  ncu --import "$out/$1.ncu-rep" --page raw > "$out/$1-raw.txt" 2>&1
  rm -f "$out/$1.ncu-rep"
}
command -v ncu > /dev/null && { prof small --dense-small "dense"; prof wide --dense "dense_ws"; } || echo "no ncu"
# Short table: the rates.
python3 - "$out/rates.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r['shape'][:36]:36s} warps/SM {r['M']:2d} {r['us']:9.1f} us {r.get('sm_mhz', 0):5.0f} MHz  {r['note']}")
PY
