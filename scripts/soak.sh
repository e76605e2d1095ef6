#!/usr/bin/env bash
# The full soak of issue 11 (docs/reliability.md): tests/integration/
# test_reliability_soak.py with 1,000 concurrent streaming requests (the test
# command runs the same test with 300, sized for CI's 2 cores).
#   scripts/soak.sh [REQUESTS]      (default 1000)
# Prints the figures and writes them to $MX_BUILD_DIR/soak-<REQUESTS>.json.
# Expects a built binary (scripts/build.sh) and .venv (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-1000}
BUILD_DIR=${MX_BUILD_DIR:-build}
report="$PWD/$BUILD_DIR/soak-$REQUESTS.json"
MX_SOAK_REQUESTS=$REQUESTS MX_SOAK_REPORT="$report" MXSERVE_BINARY="$PWD/$BUILD_DIR/mxserve" \
  .venv/bin/python -m pytest -q -s tests/integration/test_reliability_soak.py
echo "figures: $report"
