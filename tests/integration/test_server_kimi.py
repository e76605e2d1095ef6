"""`mxserve serve` on a synthetic Kimi-K2.5 MXFP4 checkpoint (MLA + MoE,
`mxserve synth`) with Kimi's real tiktoken vocabulary and K2.5 chat template:
the chat template sees tools and tool calls in the client's key order (as
transformers renders them with jinja2), and the MLA/MoE model runs through
the engine with an FP8 KV cache."""
import json
import shutil
import urllib.request

import pytest

from conftest import serve_process, synth_kimi
from tokenizer_helpers import KIMI_DIR, hf_jinja_env, hf_render

TEMPLATE = KIMI_DIR / "chat_template.kimi-k2.5-derived-kite.jinja"

pytestmark = pytest.mark.skipif(not (KIMI_DIR / "tiktoken.model").exists(), reason="shared Kimi tokenizer data missing")


@pytest.fixture(scope="module")
def server(tmp_path_factory, mxserve_binary):
    model = synth_kimi(tmp_path_factory.mktemp("kimi-synth"))
    shutil.copy(TEMPLATE, model / "chat_template.jinja")
    with serve_process(["--model", str(model), "--served-model-name", "kimi-synth", "--max-model-len", "256",
                        "--num-kv-blocks", "64", "--kv-cache-dtype", "fp8", "--threads", "2"]) as (base, _):
        yield base


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


# Keys deliberately out of alphabetical order: `tojson` must keep them as sent.
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "required": ["city"],
                                                          "properties": {"city": {"type": "string"}}}}}]
MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}]},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"unit": "C", "city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 C, sunny"},
]


def test_chat_template_renders_like_jinja2(server):
    expected_messages = [dict(m) for m in MESSAGES]
    expected_messages[1] = {"role": "user", "content": "Weather in Paris?"}  # the server joins text parts
    status, text = hf_render(hf_jinja_env(), TEMPLATE.read_text(), expected_messages, TOOLS, True,
                             bos="[BOS]", eos="[EOS]")
    assert status == "ok", text
    assert '{"unit": "C", "city": "Paris"}' in text
    ours = post(server, "/tokenize", {"messages": MESSAGES, "tools": TOOLS})["tokens"]
    theirs = post(server, "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]
    assert ours == theirs


def test_mla_moe_model_generates_through_the_engine(server):
    r = post(server, "/v1/completions", {"prompt": [5, 6, 7, 8, 9], "max_tokens": 4, "temperature": 0,
                                         "ignore_eos": True, "logprobs": 1})
    assert r["usage"]["completion_tokens"] == 4
    assert len(r["choices"][0]["logprobs"]["tokens"]) == 4
    again = post(server, "/v1/completions", {"prompt": [5, 6, 7, 8, 9], "max_tokens": 4, "temperature": 0,
                                             "ignore_eos": True, "logprobs": 1})
    assert again["choices"][0]["logprobs"]["token_logprobs"] == r["choices"][0]["logprobs"]["token_logprobs"]
