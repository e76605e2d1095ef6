#!/usr/bin/env bash
# Opt-in accuracy-path test (docs/serving-lmeval.md): installs lm-eval
# (requirements-lmeval.txt, no torch) into .venv and runs
# tests/integration/test_lmeval.py, which drives the built `mxserve serve` on
# the packaged default model with lm-eval's local-completions model. Not part
# of scripts/test.sh: the install plus the run take several minutes on 2 cores.
# Uses the build in MX_BUILD_DIR (default build); run scripts/build.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MX_BUILD_DIR:-build}

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
if ! cmp -s requirements-lmeval.txt .venv/.installed-lmeval 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-lmeval.txt
  cp requirements-lmeval.txt .venv/.installed-lmeval
fi
scripts/setup_default_model.sh >/dev/null

MXSERVE_LMEVAL=1 MXSERVE_BINARY="$PWD/$BUILD_DIR/mxserve" \
  .venv/bin/python -m pytest tests/integration/test_lmeval.py -q -rs -s "$@"
