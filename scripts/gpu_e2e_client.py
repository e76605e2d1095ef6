#!/usr/bin/env python3
"""HTTP client of scripts/gpu_e2e_check.sh (stdlib only: the GPU machine has no
`requests` guarantee).
  gpu_e2e_client.py compare CPU_PORT CUDA_PORT
      greedy completions and chat answers of both servers must be identical
  gpu_e2e_client.py throughput PORT MODEL DEVICE TOKENS
      prints one table row per concurrency (1, 32): output tokens/s
"""
import json
import sys
import threading
import time
import urllib.request

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "1, 2, 3, 4,",
           "Translate to German: good morning"]
CHATS = ["What is the capital of France?", "Write a haiku about GPUs.", "Count from one to five."]


def post(port, path, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def answers(port):
    out = []
    for p in PROMPTS:
        r = post(port, "/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0, "logprobs": 1})
        c = r["choices"][0]
        out.append(("completion", p, c["text"], c["logprobs"]["tokens"], c["finish_reason"]))
    for q in CHATS:
        r = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": q}], "max_tokens": 24,
                                                "temperature": 0})
        c = r["choices"][0]
        out.append(("chat", q, c["message"]["content"], None, c["finish_reason"]))
    return out


def compare(cpu_port, cuda_port):
    cpu, cuda = answers(cpu_port), answers(cuda_port)
    bad = 0
    for a, b in zip(cpu, cuda):
        same = a == b
        bad += not same
        print(f"  {'same' if same else 'DIFFERENT'}: {a[0]} {a[1]!r} -> {a[2]!r}" + ("" if same else f" vs cuda {b[2]!r}"))
    print(f"serve: {len(cpu) - bad} of {len(cpu)} greedy answers identical on cpu and cuda")
    return bad == 0


def throughput(port, model, device, tokens):
    body = {"prompt": [1, 17, 33, 65, 129, 200, 7, 9], "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    post(port, "/v1/completions", dict(body, max_tokens=4))  # warm-up
    for concurrency in (1, 32):
        generated = []

        def one():
            generated.append(post(port, "/v1/completions", body)["usage"]["completion_tokens"])

        threads = [threading.Thread(target=one) for _ in range(concurrency)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        secs = time.perf_counter() - t0
        if len(generated) != concurrency:
            print(f"{model} {device}: {concurrency - len(generated)} requests failed", file=sys.stderr)
            return False
        print(f"{model:<28} {device:<6} {concurrency:>12} {sum(generated) / secs:>14.1f} {secs:>12.2f}", flush=True)
    return True


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(0 if compare(int(sys.argv[2]), int(sys.argv[3])) else 1)
    if sys.argv[1] == "throughput":
        sys.exit(0 if throughput(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])) else 1)
    sys.exit(__doc__)
