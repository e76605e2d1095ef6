#!/usr/bin/env bash
# GPU parity of the CUDA batch sampler (src/cuda/sampling) against the CPU
# sampler: runs tests/gpu/sampler_parity (SAMPLER_PARITY=path, or the one on
# PATH from a scripts/gpu_bundle.sh bundle, or build-cuda's). Exit status 1 if
# any check fails. Needs an sm_90 GPU.
#   scripts/gpu_sampler_check.sh [--seed N] [--vocab V]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SAMPLER_PARITY:-$(command -v sampler_parity || echo build-cuda/src/cuda/sampler_parity)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$BIN" "$@"
