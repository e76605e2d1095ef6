"""Shared pieces of the `mxserve bench` integration tests."""
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MX_SHARED_DIR", REPO.parent / "shared"))
KIMI_DIR = SHARED / "data" / "tokenizers" / "kimi"


def mxserve_binary():
    path = os.environ.get("MXSERVE_BINARY")
    if path and Path(path).exists():
        return path
    for cand in ("build/mxserve", "build/src/mxserve", "build-bench/src/mxserve"):
        if (REPO / cand).exists():
            return str(REPO / cand)
    raise RuntimeError("set MXSERVE_BINARY to the built mxserve")


def run_mxserve(args, timeout=300):
    return subprocess.run([mxserve_binary(), *args], capture_output=True, text=True, timeout=timeout)
