#!/usr/bin/env bash
# Session 19's device calls: the batched strip loops with two batches per loop trip (`#pragma unroll`)
# against OLD_BENCH (mxfp4_bench built at 4ebd597: one batch per trip), same call, alternating. Call 1
# unrolled strip_mma_batched, the wide decode's loop and the strip-pair loop; call 2 the strip-pair loop
# with 8 K-slices only (kPairTrip, mxfp4_gemm_pair.cu):
#   [CALL=2 ROUNDS=3] bench/mxfp4/dense_s19_call.sh OUT_DIR OLD_BENCH      (new binaries on PATH: gpu_unbundle.sh; the
#   bundle carried both, the old one as mxfp4_bench_old: the tree left room for one bundle)
# ops_parity (every op and model case) on the new build, then ROUNDS times (default 2): OLD's and the new mxfp4_bench
# --dense-small (M = 1, 8, 12, 16, every kernel variant checked against the reference) and --moe-decode.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR OLD_BENCH" >&2; exit 2; }
out=$1 old=$2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
timeout 120 ops_parity > "$out/ops_parity.txt" 2>&1
echo "ops_parity: exit $?"; grep -E "cases|FAIL" "$out/ops_parity.txt" | head -5
part() {  # part NAME BINARY FLAG
  timeout 150 "$2" "$3" --json "$out/$1.jsonl" > "$out/$1.log" 2>&1 || echo "$1: exit $?"
}
for r in $(seq "${ROUNDS:-2}"); do  # call 2: ROUNDS=3, --dense-small only (moe-decode's kernels unchanged)
  part old-dense-small-$r "$old" --dense-small
  part new-dense-small-$r mxfp4_bench --dense-small
  if [[ ${CALL:-1} == 1 ]]; then
    part old-moe-decode-$r "$old" --moe-decode
    part new-moe-decode-$r mxfp4_bench --moe-decode
  fi
done
# Short table: the auto graph rows of both builds.
for f in "$out"/*.jsonl; do
  [[ -f "$f" ]] || continue  # no rows at all: the glob stays literal
  python3 - "$f" <<'PY'
import json, sys, os
name = os.path.basename(sys.argv[1])[:-6]
for line in open(sys.argv[1]):
    r = json.loads(line)
    note = r.get("note", "")
    if note.startswith("auto") and "graph" in note and "kernel," not in note:
        print(f"{name:22s} {r['shape'][:24]:24s} {r['mode']:5s} M={r['M']:<3d} {r['us']:8.2f} us {r['ratio']:.3f}x err {r['rel_err']} {r['sm_mhz']} MHz")
PY
done
