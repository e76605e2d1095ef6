#!/usr/bin/env bash
# Configures and builds mxserve into ./build (CPU backend). Extra arguments go
# to CMake (e.g. -DMXSERVE_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MX_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "${MX_JOBS:-2}"
