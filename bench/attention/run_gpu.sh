#!/usr/bin/env bash
# On the GPU machine, after `source scripts/gpu_unbundle.sh BUNDLE` (a bundle
# of attention_parity and attention_bench built here, docs/cuda-attention.md):
# the parity check, then the benchmark and the torch SDPA peer in the same run.
# Full outputs go to $OUT (or ./out) as parity.txt, bench.txt and torch.txt.
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
attention_parity "$@" > "$out/parity.txt" 2>&1
parity=$?
tail -n 3 "$out/parity.txt"
attention_bench > "$out/bench.txt" 2>&1 || echo "attention_bench failed"
python3 "$(dirname "$0")/torch_sdpa.py" > "$out/torch.txt" 2>&1 || echo "torch_sdpa.py failed"
grep -c "| ok |" "$out/parity.txt"
grep "FAIL" "$out/parity.txt" | head -40
cat "$out/bench.txt" "$out/torch.txt" | tail -n 40
exit $parity
