"""`mxserve bench serve` against a scripted server whose chunks go out at
known times: every reported metric must match the seed's definitions (TTFT to
the first choices chunk, ITL per chunk not per token, E2EL to the last choices
chunk, TPOT only for requests with more than one token, tokens from usage).

Two references: the times the server really wrote each chunk (recorded by the
server on CLOCK_MONOTONIC, which the client's result JSON also reports its
start on; the client must match them within TOL_MS)
and the script itself (the server follows it within SCRIPT_TOL_MS even on a
loaded machine; this catches a wrong definition that happens to match)."""
import json

import numpy as np
import pytest

from bench_helpers import KIMI_DIR, run_mxserve
from fake_openai_server import FakeOpenAIServer, Script

# Client-observed vs. server-written times: the socket hop and the client's
# epoll wake-up. Median 0.05 ms; but at load average 13 on the 2-core dev box a
# starved client process sometimes saw a chunk 10-15 ms late, so the run is
# repeated (up to ATTEMPTS) until one has every sample within TOL_MS. A wrong
# definition is off in every run; scheduling noise is not.
TOL_MS = 5.0
ATTEMPTS = 3
# Server-written vs. scripted times: Python sleeps and threads on a busy box.
SCRIPT_TOL_MS = 25.0

SCRIPTS = [
    Script(ttft_ms=40, gaps_ms=[60, 60, 60], usage_delay_ms=30),           # 4 tokens, 4 chunks
    Script(ttft_ms=70),                                                    # a single token: no TPOT
    Script(ttft_ms=30, gaps_ms=[90, 90], tokens=[3, 3, 3]),                # 9 tokens in 3 chunks
    Script(ttft_ms=100, gaps_ms=[40] * 5, usage_delay_ms=50),              # 6 tokens
    Script(ttft_ms=60, gaps_ms=[80], tokens=[2, 2]),                       # 4 tokens in 2 chunks
]
# Sizes chosen so each definition matters beyond the tolerance: counting the
# single-token requests' TPOT as 0 moves the mean TPOT by ~7 ms, an ITL per
# token instead of per chunk moves the mean ITL by ~18 ms.
REPEATS = 2
PERCENTILES = [25, 50, 90, 99]

pytestmark = pytest.mark.skipif(not KIMI_DIR.exists(), reason="shared Kimi tokenizer not present")


def expected_samples():
    ttft, e2el, tpot, itl = [], [], [], []
    for s in SCRIPTS * REPEATS:
        offsets = s.chunk_offsets_ms()
        ttft.append(offsets[0])
        e2el.append(offsets[-1])
        itl.extend(s.gaps_ms)
        if s.completion_tokens > 1:
            tpot.append((offsets[-1] - offsets[0]) / (s.completion_tokens - 1))
    return {"ttft": ttft, "e2el": e2el, "tpot": tpot, "itl": itl}


def run_bench(server, tmp_path, *extra):
    args = ["bench", "serve", "--backend=vllm", f"--base-url=http://127.0.0.1:{server.port}",
            f"--model={KIMI_DIR}", "--trust-remote-code", "--dataset-name=random",
            "--random-input-len=32", "--random-output-len=8", "--random-range-ratio=1.0",
            f"--num-prompts={len(SCRIPTS) * REPEATS}", "--max-concurrency=3", "--request-rate=inf",
            "--percentile-metrics=ttft,tpot,itl,e2el",
            "--metric-percentiles=" + ",".join(str(p) for p in PERCENTILES),
            "--num-warmups=0", "--save-result", f"--result-dir={tmp_path}",
            "--result-filename=result.json", "--disable-tqdm", *extra]
    proc = run_mxserve(args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc, json.loads((tmp_path / "result.json").read_text())


def max_deviation_ms(result, server):
    worst = 0.0
    for i, expected in enumerate(server_samples(result, server)):
        worst = max(worst, abs(result["ttfts"][i] * 1000 - expected["ttft"]),
                    abs(result["e2els"][i] * 1000 - expected["e2el"]))
        if len(result["itls"][i]) == len(expected["itl"]):
            worst = max([worst] + list(np.abs(np.array(result["itls"][i]) * 1000 - expected["itl"])))
    return worst


def server_lateness_ms(server):
    """How far the fake server's own writes strayed from its script (measured
    from when it received each request): a number about the machine, not the
    client under test."""
    worst = 0.0
    for serial, actual in server.actual.items():
        script = server.scripts[serial % len(server.scripts)]
        writes = (np.array(actual["writes"]) - actual["received"]) * 1000
        scripted = np.array(script.chunk_offsets_ms()[:len(writes)])
        worst = max(worst, float(np.max(np.abs(writes[:len(scripted)] - scripted))))
    return worst


def skip_if_machine_overloaded(server):
    # The timing checks need the scripted server to keep its own schedule. When
    # the server itself ran far off its script, the machine was too loaded to
    # judge the client; a wrong client is off even when the server is on time.
    lateness = server_lateness_ms(server)
    if lateness > SCRIPT_TOL_MS / 2:
        pytest.skip(f"machine overloaded: the fake server ran {lateness:.1f} ms off its own script")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    for attempt in range(ATTEMPTS):
        tmp = tmp_path_factory.mktemp("bench")
        with FakeOpenAIServer(SCRIPTS) as server:
            proc, result = run_bench(server, tmp, "--ignore-eos")
        if max_deviation_ms(result, server) <= TOL_MS:
            break
    return proc, result, server, tmp


def server_samples(result, server):
    """The metrics the seed's definitions give for what the server actually did,
    per request in the client's order (paired through the r<serial>| marker)."""
    per_request = []
    for i, text in enumerate(result["generated_texts"]):
        serial = int(text.split("|")[0][1:])
        actual = server.actual[serial]
        sent = result["monotonic_origin_s"] + result["start_times"][i]
        writes = (np.array(actual["writes"]) - sent) * 1000
        script = server.scripts[serial % len(server.scripts)]
        tokens = script.completion_tokens
        per_request.append({
            "ttft": writes[0],
            "e2el": writes[-1],
            "itl": list(np.diff(writes)),
            "tpot": (writes[-1] - writes[0]) / (tokens - 1) if tokens > 1 else None,
            "tokens": tokens,
        })
    return per_request


def pooled(per_request):
    return {
        "ttft": [r["ttft"] for r in per_request],
        "e2el": [r["e2el"] for r in per_request],
        "tpot": [r["tpot"] for r in per_request if r["tpot"] is not None],
        "itl": [g for r in per_request for g in r["itl"]],
    }


def check_summary(result, samples, tol):
    for name, values in samples.items():
        values = np.array(values)
        assert result[f"mean_{name}_ms"] == pytest.approx(values.mean(), abs=tol), name
        assert result[f"median_{name}_ms"] == pytest.approx(np.median(values), abs=tol), name
        assert result[f"std_{name}_ms"] == pytest.approx(values.std(), abs=tol), name
        for p in PERCENTILES:
            assert result[f"p{p}_{name}_ms"] == pytest.approx(np.percentile(values, p), abs=tol), (name, p)


def test_every_metric_matches_what_the_server_did(bench_run):
    _, result, server, _ = bench_run
    if max_deviation_ms(result, server) > TOL_MS:
        skip_if_machine_overloaded(server)
    per_request = server_samples(result, server)
    for i, expected in enumerate(per_request):
        assert result["ttfts"][i] * 1000 == pytest.approx(expected["ttft"], abs=TOL_MS)
        assert result["e2els"][i] * 1000 == pytest.approx(expected["e2el"], abs=TOL_MS)
        assert np.array(result["itls"][i]) * 1000 == pytest.approx(expected["itl"], abs=TOL_MS)
        assert result["output_lens"][i] == expected["tokens"]
    check_summary(result, pooled(per_request), TOL_MS)


def test_every_metric_matches_the_script(bench_run):
    _, result, server, _ = bench_run
    skip_if_machine_overloaded(server)
    check_summary(result, expected_samples(), SCRIPT_TOL_MS)


def test_per_request_samples_and_token_counts(bench_run):
    _, result, server, _ = bench_run
    skip_if_machine_overloaded(server)
    expected = expected_samples()
    n = len(SCRIPTS) * REPEATS
    assert result["completed"] == n
    assert all(result["successes"]) and result["errors"] == [""] * n
    # ITL is one sample per chunk after the first, not per token.
    all_itls = [g for per_request in result["itls"] for g in per_request]
    assert len(all_itls) == len(expected["itl"])
    assert sorted(np.array(all_itls) * 1000) == pytest.approx(sorted(expected["itl"]), abs=SCRIPT_TOL_MS)
    # Output tokens come from usage.completion_tokens, not from counting chunks.
    assert sorted(result["output_lens"]) == sorted(s.completion_tokens for s in SCRIPTS * REPEATS)
    assert result["total_output_tokens"] == sum(s.completion_tokens for s in SCRIPTS) * REPEATS
    assert result["input_lens"] == [32] * n
    assert result["total_input_tokens"] == 32 * n
    d = result["duration"]
    assert result["request_throughput"] == pytest.approx(n / d)
    assert result["output_throughput"] == pytest.approx(result["total_output_tokens"] / d)
    assert result["total_token_throughput"] == pytest.approx((32 * n + result["total_output_tokens"]) / d)
    # Three streams at a time through ~100 ms requests: the run takes a few hundred ms.
    assert 0.2 < d < 5


def test_requests_are_sent_as_the_seed_tool_sends_them(bench_run):
    _, _, server, _ = bench_run
    assert server.paths == ["/v1/completions"] * len(server.bodies)
    for body in server.bodies:
        assert body["model"] == str(KIMI_DIR)
        assert body["temperature"] == 0.0
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["max_tokens"] == 8
        assert body["ignore_eos"] is True
        assert isinstance(body["prompt"], str) and body["prompt"]


def test_terminal_table_has_the_seed_layout(bench_run):
    proc, result, _, _ = bench_run
    out = proc.stdout
    assert "============ Serving Benchmark Result ============" in out
    lines = out[out.index("============ Serving"):].splitlines()
    assert lines[1].startswith("Successful requests:") and lines[1].split()[-1] == "10"
    for label in ("Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
                  "Request throughput (req/s):", "Output token throughput (tok/s):",
                  "Total Token throughput (tok/s):", "---------------Time to First Token----------------",
                  "-----Time per Output Token (excl. 1st token)------",
                  "---------------Inter-token Latency----------------",
                  "----------------End-to-end Latency----------------"):
        assert any(line.startswith(label) for line in lines), label
    mean_tpot = next(line for line in lines if line.startswith("Mean TPOT (ms):"))
    assert mean_tpot.index(mean_tpot.split()[-1]) == 41  # "{:<40} " then the value
    assert float(mean_tpot.split()[-1]) == pytest.approx(result["mean_tpot_ms"], abs=0.006)
    assert any(line.startswith("P90 ITL (ms):") for line in lines)
    assert "=" * 50 in lines  # the block's closing rule


def test_html_report_is_self_contained_and_regenerable(bench_run):
    _, _, _, tmp = bench_run
    html = (tmp / "result.html").read_text()
    for title in ("TTFT", "TPOT", "ITL", "E2EL", "Output throughput over time"):
        assert title in html
    assert html.count("<svg") >= 6
    assert "<script" not in html and "src=" not in html and "href=" not in html
    proc = run_mxserve(["bench", "report", f"--result={tmp / 'result.json'}", f"--out={tmp / 'again.html'}"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "again.html").read_text() == html


def test_chat_backend_and_request_rate(tmp_path):
    scripts = [Script(ttft_ms=20, gaps_ms=[15, 15])]
    with FakeOpenAIServer(scripts) as server:
        proc, result = run_bench(server, tmp_path, "--backend=openai-chat", "--request-rate=20",
                                 "--burstiness=2", "--num-prompts=6")
    skip_if_machine_overloaded(server)
    assert server.paths == ["/v1/chat/completions"] * 6
    assert all(b["max_completion_tokens"] == 8 and b["messages"][0]["role"] == "user" for b in server.bodies)
    assert "ignore_eos" not in server.bodies[0]
    assert result["mean_ttft_ms"] == pytest.approx(20, abs=SCRIPT_TOL_MS)
    assert result["mean_itl_ms"] == pytest.approx(15, abs=SCRIPT_TOL_MS)
    assert len(result["itls"][0]) == 2
    # Arrivals are spread over time at ~20 req/s: sends are not simultaneous.
    starts = sorted(result["start_times"])
    assert starts[-1] - starts[0] > 0.05
    assert result["request_rate"] == 20.0 and result["burstiness"] == 2.0


def test_failed_requests_are_reported_not_counted(tmp_path):
    scripts = [Script(ttft_ms=10, gaps_ms=[10]), Script(ttft_ms=0, status=500)]
    with FakeOpenAIServer(scripts) as server:
        proc, result = run_bench(server, tmp_path, "--num-prompts=6", "--max-concurrency=1")
    assert result["completed"] == 3 and result["failed"] == 3
    assert result["total_output_tokens"] == 6  # failed requests add no tokens
    assert result["total_input_tokens"] == 3 * 32
    failures = [e for e, ok in zip(result["errors"], result["successes"]) if not ok]
    assert len(failures) == 3 and all("HTTP 500" in e and "scripted failure" in e for e in failures)
    assert any(line.startswith("Failed requests:") and line.split()[-1] == "3"
               for line in proc.stdout.splitlines())


def test_unreachable_server_fails_with_a_message(tmp_path):
    proc = run_mxserve(["bench", "serve", f"--model={KIMI_DIR}", "--base-url=http://127.0.0.1:1",
                        "--num-prompts=2", "--random-input-len=8", "--num-warmups=0", "--disable-tqdm"])
    assert proc.returncode == 1
    assert "all 2 requests failed" in proc.stderr and "connect to 127.0.0.1:1" in proc.stderr
