#!/usr/bin/env bash
# One device call for the MoE prefill kernels (fused_moe_wgmma.cu, the tiles of
# fused_moe_prefill.cu): correctness and timing at 512 and 8192 tokens
# (mxfp4_bench --moe-prefill, every variant in the same process), then the
# torch BF16 grouped-GEMM peer at 8192 tokens, then the merged table.
#   bench/mxfp4/prefill_check.sh BENCH_BINARY PEERS_PY OUT_DIR
set -uo pipefail
bench=$1 peers=$2 out=$3
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
timeout 240 "$bench" --moe-prefill --json "$out/bench.jsonl" 2>&1 | tee "$out/bench.log" || echo "BENCH FAILED"
PYTHONUNBUFFERED=1 python3 bench/mxfp4/peers_run.py --peers "$peers" --moe-tokens 8192 \
  --json "$out/peers.jsonl" 2>&1 | tee "$out/peers.log" || echo "peers failed"
python3 bench/mxfp4/report.py "$out/bench.jsonl" "$out/peers.jsonl" | tee "$out/table.md"
