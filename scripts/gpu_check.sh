#!/usr/bin/env bash
# GPU check and benchmark of the MXFP4 kernels (needs an sm_90 GPU: H100/H200).
# Builds bench/mxfp4 into build-cuda (needs the project's build dependencies,
# scripts/install_deps.sh, and an nvcc with sm_90a; tried with 13.0), or uses a binary built elsewhere
# (MXFP4_BENCH=path: build on a machine with the dependencies, carry the binary,
# which links the CUDA runtime statically). Runs it (correctness on fresh random
# inputs + timings), then the same-run peers (Triton, cuBLAS, torch grouped GEMM;
# MXFP4_PEERS=path/to/mxfp4_peers.py, default ../shared/peers/) and prints the
# merged table last. Logs and JSON go to --out (default out/gpu_check).
# --no-ops skips the CUDA backend parity check (scripts/gpu_ops_check.sh),
# which otherwise runs before the table is printed.
#   scripts/gpu_check.sh [--quick] [--out DIR] [--no-peers] [--no-ops]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=out/gpu_check
QUICK=()
PEERS=1
OPS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --out) OUT_DIR="$2"; shift ;;
    --no-peers) PEERS=0 ;;
    --no-ops) OPS=0 ;;
    *) echo "usage: $0 [--quick] [--out DIR] [--no-peers] [--no-ops]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT_DIR"
BENCH=${MXFP4_BENCH:-}
if [[ -z "$BENCH" ]]; then
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXSERVE_CUDA=ON -DMXSERVE_TESTS=OFF >/dev/null
  cmake --build build-cuda --target mxfp4_bench -j "$(nproc)"
  BENCH=build-cuda/src/cuda/mxfp4_bench
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT_DIR/gpu.txt"
# Rows are written as they are measured: if the bench dies, the table still
# shows what it measured before (and the failure is printed).
"$BENCH" "${QUICK[@]}" --json "$OUT_DIR/bench.jsonl" 2>&1 | tee "$OUT_DIR/bench.log" ||
  echo "BENCH FAILED (exit $?): see bench.log"
PEERS_JSON=()
if [[ $PEERS == 1 ]]; then
  PEERS_PY=${MXFP4_PEERS:-../shared/peers/mxfp4_peers.py}
  PYTHONUNBUFFERED=1 python3 bench/mxfp4/peers_run.py --peers "$PEERS_PY" "${QUICK[@]}" \
    --json "$OUT_DIR/peers.jsonl" 2>&1 | tee "$OUT_DIR/peers.log" || echo "peers failed (see peers.log)"
  PEERS_JSON=("$OUT_DIR/peers.jsonl")
fi
# CUDA backend ops vs the CPU reference (scripts/gpu_ops_check.sh; OPS_PARITY=path
# to use a carried binary).
if [[ $OPS == 1 ]]; then
  echo
  scripts/gpu_ops_check.sh || echo "ops parity failed (see above)"
fi
echo
python3 bench/mxfp4/report.py "$OUT_DIR/bench.jsonl" "${PEERS_JSON[@]}" | tee "$OUT_DIR/table.md"
