#!/usr/bin/env bash
# Session 20's device call: which pipe sets the dense kernels' rate at 8-64 tokens, and kernel 9 with
# 4-tile weight batches (each tile's activations loaded just before it; GemmConfig::batch_tiles 4).
#   bench/mxfp4/pipes_s20_call.sh OUT_DIR      (mxfp4_bench and ops_parity on PATH: scripts/gpu_unbundle.sh)
# 1. ops_parity (every op and model case).
# 2. mxfp4_bench --mma-rates: mma.sync, wgmma RS (n 16..128) and the dequant's instructions alone.
# 3. ROUNDS (default 2) x mxfp4_bench --dense-small: every variant, the new (9, ks, batch 4) rows beside
#    (9, ks, batch 2) and auto, all checked against the reference.
# 4. ncu (ComputeWorkloadAnalysis: per-pipe utilization; WarpStateStats; SpeedOfLight) of the automatic
#    kernels at 8 / 16 tokens (--profile --dense-small) and, with WIDE=1, of the ring kernel (--profile --dense).
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv | tee "$out/gpu.txt"
timeout 120 ops_parity > "$out/ops_parity.txt" 2>&1
echo "ops_parity: exit $?"; grep -E "cases|FAIL" "$out/ops_parity.txt" | head -5
timeout 150 mxfp4_bench --mma-rates --json "$out/rates.jsonl" > "$out/rates.log" 2>&1 || echo "rates: exit $?"
for r in $(seq "${ROUNDS:-2}"); do
  timeout 170 mxfp4_bench --dense-small --json "$out/dense-small-$r.jsonl" > "$out/dense-small-$r.log" 2>&1 \
    || echo "dense-small $r: exit $?"
done
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats
          --section Occupancy --section LaunchStats)
prof() {  # prof NAME FLAG REGEX
  timeout 150 ncu --clock-control none -k "regex:$3" "${sections[@]}" -o "$out/$1" -f \
    mxfp4_bench --profile "$2" > "$out/$1.log" 2>&1 || echo "ncu $1: exit $?"
  ncu --import "$out/$1.ncu-rep" --page details > "$out/$1-details.txt" 2>&1
  ncu --import "$out/$1.ncu-rep" --page raw > "$out/$1-raw.txt" 2>&1
  rm -f "$out/$1.ncu-rep"
}
if command -v ncu > /dev/null; then
  prof small --dense-small "dense"
  [[ ${WIDE:-0} == 1 ]] && prof wide --dense "dense_ws"
else
  echo "no ncu"
fi
# Short tables: the rates, then kernel 9's rows and auto at 12 / 16 tokens.
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
for line in open(os.path.join(out, "rates.jsonl")):
    r = json.loads(line)
    print(f"{r['shape'][:36]:36s} warps/SM {r['M']:2d} {r['us']:9.1f} us {r.get('sm_mhz', 0):5.0f} MHz  {r['note']}")
for f in sorted(glob.glob(os.path.join(out, "dense-small-*.jsonl"))):
    for line in open(f):
        r = json.loads(line)
        note = r.get("note", "")
        if r.get("kernel") == "gemm" and r["M"] in (12, 16) and ("strip-pair" in note or note.startswith("auto")) \
                and "graph" in note:
            print(f"{os.path.basename(f)[:14]} {r['shape'][:28]:28s} M={r['M']:<3d} {r['us']:8.2f} us {r['ratio']:.3f}x "
                  f"err {r['rel_err']:.2e} {r.get('sm_mhz', 0):.0f} MHz {note[:60]}")
PY
