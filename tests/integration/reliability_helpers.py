"""Helpers shared by the reliability tests (test_reliability_*.py): /metrics as
a dict, waiting for the engine to be idle, one completion, one stream, and the
server's resident memory."""
import http.client
import json
import re
import socket
import time

IDLE_GAUGES = ("mxserve:num_requests_running", "mxserve:num_requests_waiting", "mxserve:kv_cache_usage_perc")


def host_port(base):
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def metrics(base):
    conn = http.client.HTTPConnection(*host_port(base), timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {k: float(v) for k, v in re.findall(r"^(mxserve:\S+) (\S+)$", text, re.M)}


def wait_idle(base, timeout=30, finished=None):
    """Waits until no sequence runs or waits, no KV block is held and, when
    given, request_success_total has reached `finished`; returns /metrics then.
    The gauges are updated at the end of each engine step, so a request that
    has just been added (its prefill running) can still read as idle: callers
    that know how many requests must finish pass `finished`."""
    deadline = time.time() + timeout
    while True:
        m = metrics(base)
        if all(m[g] == 0 for g in IDLE_GAUGES) and (finished is None or m["mxserve:request_success_total"] >= finished):
            return m
        assert time.time() < deadline, ({g: m[g] for g in IDLE_GAUGES}, m["mxserve:request_success_total"], finished)
        time.sleep(0.1)


def complete(base, body, path="/v1/completions", timeout=120):
    """Returns (status, parsed JSON body)."""
    conn = http.client.HTTPConnection(*host_port(base), timeout=timeout)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data)


def stream(base, body, cancel_after_events=None, timeout=300):
    """Streams a completion. Returns (kind, texts by choice index, events): kind is
    ok, cancelled, http_<status>, stream_error or connect_error. With
    cancel_after_events=k the client hangs up after k data events."""
    try:
        conn = http.client.HTTPConnection(*host_port(base), timeout=timeout)
        conn.request("POST", "/v1/completions", json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
    except OSError as e:
        return "connect_error", {}, [repr(e)]
    if r.status != 200:
        return f"http_{r.status}", {}, [r.read().decode(errors="replace")]
    texts, events = {}, []
    try:
        while line := r.readline():
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            if cancel_after_events is not None and len(events) >= cancel_after_events:
                conn.sock.shutdown(socket.SHUT_RDWR)
                return "cancelled", texts, events
            if line == "data: [DONE]":
                return "ok", texts, events
            event = json.loads(line[len("data: "):])
            events.append(event)
            if "error" in event:
                return "stream_error", texts, events
            for c in event["choices"]:
                texts[c["index"]] = texts.get(c["index"], "") + c["text"]
    except OSError as e:
        return "connect_error", texts, events + [repr(e)]
    finally:
        conn.close()
    return "stream_error", texts, events  # closed without [DONE]


def rss_kib(pid):
    """VmRSS of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
