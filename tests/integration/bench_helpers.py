"""Shared pieces of the `mxserve bench` integration tests."""
import os
import subprocess
from pathlib import Path

from conftest import mxserve_binary_path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MX_SHARED_DIR", REPO.parent / "shared"))
KIMI_DIR = SHARED / "data" / "tokenizers" / "kimi"


def mxserve_binary():
    return mxserve_binary_path()


def run_mxserve(args, timeout=300):
    return subprocess.run([mxserve_binary(), *args], capture_output=True, text=True, timeout=timeout)
