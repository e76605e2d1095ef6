"""Chat templates rendered by `mxserve tokenize --jsonl` (op render) compared
with Python jinja2 configured as transformers does it
(ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
loopcontrols), tojson = json.dumps(ensure_ascii=False), raise_exception),
on conversations with tools, tool calls, multi-turn, images, thinking on/off."""
import json
import shutil
import subprocess

import pytest

from tokenizer_helpers import KIMI_DIR, hf_jinja_env, hf_render, mxserve_binary, run_jsonl
from tokenizer_templates import TEMPLATES

pytest.importorskip("jinja2")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather 天气 for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


def conversations():
    sys_msg = {"role": "system", "content": "You are a careful assistant."}
    user = {"role": "user", "content": "Hi! What's the weather in 北京 today? 🌤"}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                            "function": {"name": "get_weather", "arguments": "{\"city\": \"北京\"}"}}]}
    call_obj = {"role": "assistant", "content": None,
                "tool_calls": [{"id": "functions.search:1", "type": "function",
                                "function": {"name": "search", "arguments": {"q": "weather \"Beijing\"", "n": 3}}}]}
    result = {"role": "tool", "tool_call_id": "functions.get_weather:0", "name": "get_weather",
              "content": "{\"temp\": 21, \"sky\": \"clear\"}"}
    answer = {"role": "assistant", "content": "It is 21°C and clear.", "reasoning_content": "The tool said 21."}
    think_answer = {"role": "assistant", "content": "<think>hmm</think>Sure.", "reasoning_content": "hmm"}
    image = {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                         {"type": "image_url", "image_url": {"url": "data:,x"}}]}
    named = {"role": "user", "name": "alice", "content": "  padded with spaces \n"}
    convs = [
        ([user], None, True, None),
        ([user], None, False, None),
        ([sys_msg, user], None, True, None),
        ([sys_msg, user, answer, {"role": "user", "content": "And tomorrow?"}], None, True, None),
        ([user], [WEATHER], True, None),
        ([sys_msg, user, call, result, answer], [WEATHER, SEARCH], True, None),
        ([user, call_obj, {"role": "tool", "tool_call_id": "functions.search:1", "content": "no results"}], [SEARCH],
         True, None),
        ([user, think_answer, named], None, True, {"thinking": True}),
        ([user, answer], None, True, {"thinking": False}),
        ([user, answer, {"role": "user", "content": "more"}], None, True, {"thinking": False, "preserve_thinking": True}),
        ([image], None, True, None),
        ([named, {"role": "assistant", "content": "ok"}], None, False, None),
        ([sys_msg, {"role": "system", "content": "Second system."}, user], None, True, None),
        ([], None, True, None),
    ]
    return convs


def template_sources():
    sources = {f.name: f.read_text() for f in sorted(KIMI_DIR.glob("*.jinja"))}
    config = json.loads((KIMI_DIR / "tokenizer_config.kimi-k2-instruct.json").read_text())
    sources["tokenizer_config.kimi-k2-instruct.json:chat_template"] = config["chat_template"]
    sources.update(TEMPLATES)
    return sources


@pytest.mark.parametrize("name", sorted(template_sources()))
def test_render_matches_jinja2(name, tmp_path):
    source = template_sources()[name]
    path = tmp_path / "template.jinja"
    path.write_text(source)
    env = hf_jinja_env()
    requests, expected = [], []
    for messages, tools, gen, extra in conversations():
        requests.append({"op": "render", "messages": messages, "tools": tools, "add_generation_prompt": gen,
                         "extra": extra})
        expected.append(hf_render(env, source, messages, tools, gen, extra))
    # bos/eos come from --model's tokenizer; with --template alone they are "".
    answers = run_jsonl(["--template", str(path)], requests)
    rendered = 0
    for req, (status, ref), ans in zip(requests, expected, answers):
        if status == "ok":
            assert ans.get("text") == ref, (name, req, ans)
            rendered += 1
        else:
            assert "error" in ans, (name, req, ref, ans)
    assert rendered >= 3, name
    print(f"{name}: {rendered} conversations rendered identically, {len(requests) - rendered} errors on both sides")


def test_model_dir_template_and_special_tokens(tmp_path):
    # load_chat_template reads tokenizer_config.json's chat_template; bos/eos strings come along.
    shutil.copy(KIMI_DIR / "tokenizer_config.kimi-k2-instruct.json", tmp_path / "tokenizer_config.json")
    shutil.copy(KIMI_DIR / "tiktoken.model", tmp_path / "tiktoken.model")
    messages = [{"role": "user", "content": "hello"}]
    (ans,) = run_jsonl(["--model", str(tmp_path)],
                       [{"op": "render", "messages": messages, "tools": None, "add_generation_prompt": True}])
    status, ref = hf_render(hf_jinja_env(), json.loads((tmp_path / "tokenizer_config.json").read_text())["chat_template"],
                            messages, None, True, bos="[BOS]", eos="[EOS]")
    assert status == "ok" and ans["text"] == ref
    # The rendered prompt tokenizes with its markers as special ids.
    (enc,) = run_jsonl(["--model", str(tmp_path)], [{"op": "encode", "text": ans["text"], "allow_special": True}])
    assert enc["ids"][0] == 163594 and enc["ids"][-1] == 163601  # <|im_system|> ... <|im_middle|>


def test_template_errors_are_reported():
    requests = [{"op": "render", "messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True}]
    env = hf_jinja_env()
    source = TEMPLATES["llama3_style"]
    two_calls = [{"role": "user", "content": "x"},
                 {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}},
                                                      {"function": {"name": "b", "arguments": {}}}]}]
    status, ref = hf_render(env, source, two_calls, [WEATHER], True)
    assert status == "error" and "single tool-calls" in ref
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(source)
    (ans,) = run_jsonl(["--template", f.name], [{"op": "render", "messages": two_calls, "tools": [WEATHER],
                                                 "add_generation_prompt": True}])
    assert ans["error"] == "This model only supports single tool-calls at once!"
    # A construct outside the subset fails when the template is parsed: exit 2, naming it and its line.
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write("line one\n{% include 'other.jinja' %}")
    proc = subprocess.run([mxserve_binary(), "tokenize", "--jsonl", "--template", f.name],
                          input=json.dumps(requests[0]).encode(), capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert "chat template line 2: unsupported tag 'include'" in proc.stderr.decode()
