#!/usr/bin/env bash
# MLA decode check + benchmark on a GPU machine (docs/mla-decode.md).
# Here:   cmake --build build-mla --target mla_decode_bench &&
#         scripts/gpu_bundle.sh .carry/mla.tar.xz build-mla/src/cuda/mla_decode_bench
# There (device tool, carry .carry/mla.tar.xz):
#         source scripts/gpu_unbundle.sh .carry/mla.tar.xz && bench/attention/mla_decode_check.sh
# Writes gpu.txt, bench.txt (correctness, then the table), peer.txt (torch) and
# memcheck.txt (compute-sanitizer over the correctness cases) under $OUT.
set -uo pipefail
out=${OUT:-/tmp/mla_decode_out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
mla_decode_bench "$@" 2>&1 | tee "$out/bench.txt"
status=${PIPESTATUS[0]}
PYTHONUNBUFFERED=1 timeout 240 python3 "$(dirname "$0")/mla_decode_peer.py" 2>&1 | tee "$out/peer.txt"
timeout 150 compute-sanitizer --tool memcheck mla_decode_bench --check-only > "$out/memcheck.txt" 2>&1
echo "memcheck exit $?"; tail -4 "$out/memcheck.txt"
exit "$status"
