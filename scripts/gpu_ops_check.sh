#!/usr/bin/env bash
# GPU parity of the CUDA backend's ops (src/cuda/backend) against the CPU
# reference backend (needs an sm_90 GPU: H100/H200). Builds tests/gpu/ops_parity
# into build-cuda (needs the project's build dependencies and nvcc with sm_90a),
# or runs a binary built elsewhere (OPS_PARITY=path; libcudart.so.13 and
# libfmt.so.9 must be on LD_LIBRARY_PATH there). Prints the
# per-op table last; exit status 1 if any op is outside its threshold.
#   scripts/gpu_ops_check.sh [--seed N]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${OPS_PARITY:-}
if [[ -z "$BIN" ]]; then
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXSERVE_CUDA=ON -DMXSERVE_TESTS=OFF >/dev/null
  cmake --build build-cuda --target ops_parity -j "$(nproc)"
  BIN=build-cuda/src/cuda/ops_parity
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$BIN" "$@"
