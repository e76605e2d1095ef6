#!/usr/bin/env bash
# GPU parity of the CUDA backend (src/cuda/backend) against the CPU reference
# backend: every non-attention op on fresh random inputs, then whole synthetic
# models (the tests/golden cases) on both backends and against the goldens.
# Needs an sm_90 GPU (H100/H200). Where the binary comes from:
#   --bundle FILE.tar.xz  a bundle made here by scripts/gpu_bundle.sh holding
#                         ops_parity (the GPU machine has no build dependencies):
#                           scripts/gpu_bundle.sh .carry/ops.tar.xz build-core/src/cuda/ops_parity
#   OPS_PARITY=path       a binary built elsewhere (libcudart, libfmt, cuBLAS on LD_LIBRARY_PATH)
#   neither               builds tests/gpu/ops_parity into build-cuda (needs the
#                         project's build dependencies and nvcc with sm_90a)
# Runs from the repository root (the goldens are read from tests/golden). Prints
# the per-case tables last; exit status 1 if any case is outside its threshold.
#   scripts/gpu_ops_check.sh [--bundle FILE.tar.xz] [--seed N] [--ops-only | --models-only]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${OPS_PARITY:-}
if [[ ${1:-} == --bundle ]]; then
  # shellcheck disable=SC1091
  source scripts/gpu_unbundle.sh "$2"
  BIN=/tmp/mxbundle/bin/ops_parity
  shift 2
fi
if [[ -z "$BIN" ]]; then
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXSERVE_CUDA=ON -DMXSERVE_TESTS=OFF >/dev/null
  cmake --build build-cuda --target ops_parity -j "$(nproc)"
  BIN=build-cuda/src/cuda/ops_parity
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$BIN" --golden tests/golden "$@"
