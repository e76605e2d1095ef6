"""The random dataset of `mxserve bench` against a Python reimplementation of
the seed's definition with numpy's default_rng (serving.md):

  rng = np.random.default_rng(seed)
  prefix   = rng.integers(0, V, prefix_len)              (when prefix_len > 0)
  in_lens  = rng.integers(int(L_in * ratio), L_in + 1, n)
  out_lens = rng.integers(int(L_out * ratio), L_out + 1, n)
  offsets  = rng.integers(0, V, n)
  ids_i    = prefix + [(offsets[i] + i + k) % V for k < in_lens[i]]
  prompt_i = decode(ids_i), re-encoded up to 10 times until the length survives
             (truncate when too long, pad with rng.integers(0, V, missing) when short)

The tokenizer side (decode/encode) is mxserve's own, driven line by line
through `mxserve tokenize --jsonl`, so this checks the dataset logic and the
random draws, not the tokenizer."""
import json
import subprocess

import numpy as np
import pytest

from bench_helpers import KIMI_DIR, mxserve_binary, run_mxserve

pytestmark = pytest.mark.skipif(not KIMI_DIR.exists(), reason="shared Kimi tokenizer not present")


class TokenizerProcess:
    """One `mxserve tokenize --jsonl` process answering a request per line
    (stdbuf makes its stdout line-buffered so we can talk to it)."""

    def __init__(self, model_dir):
        self.proc = subprocess.Popen(["stdbuf", "-oL", mxserve_binary(), "tokenize", "--model", str(model_dir),
                                      "--jsonl"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer
        return answer

    def encode(self, text):
        return self.ask({"op": "encode", "text": text, "allow_special": True})["ids"]

    def decode(self, ids):
        return self.ask({"op": "decode", "ids": [int(i) for i in ids], "skip_special": False})["text"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def tok():
    t = TokenizerProcess(KIMI_DIR)
    yield t
    t.close()


def reference_dataset(tok, seed, n, input_len, output_len, ratio, prefix_len):
    vocab = tok.ask({"op": "info"})["vocab_size"]
    rng = np.random.default_rng(seed)
    prefix = rng.integers(0, vocab, size=prefix_len).tolist() if prefix_len > 0 else []
    in_lens = rng.integers(int(input_len * ratio), input_len + 1, size=n)
    out_lens = rng.integers(int(output_len * ratio), output_len + 1, size=n)
    offsets = rng.integers(0, vocab, size=n)
    out = []
    for i in range(n):
        target = prefix_len + int(in_lens[i])
        ids = prefix + [int((offsets[i] + i + k) % vocab) for k in range(in_lens[i])]
        assert len(ids) == target
        prompt = tok.decode(ids)
        for _ in range(10):
            ids = tok.encode(prompt)
            if len(ids) < target:
                ids += rng.integers(0, vocab, size=target - len(ids)).tolist()
            elif len(ids) > target:
                ids = ids[:target]
            else:
                break
            prompt = tok.decode(ids)
        out.append({"prompt": prompt, "prompt_len": len(tok.encode(prompt)),
                    "target_prompt_len": target, "output_len": int(out_lens[i])})
    return out


def mxserve_dataset(seed, n, input_len, output_len, ratio, prefix_len):
    proc = run_mxserve(["bench", "dataset", f"--model={KIMI_DIR}", f"--seed={seed}", f"--num-prompts={n}",
                        f"--random-input-len={input_len}", f"--random-output-len={output_len}",
                        f"--random-range-ratio={ratio}", f"--random-prefix-len={prefix_len}"])
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("ratio", [1.0, 0.5])
@pytest.mark.parametrize("prefix_len", [0, 7])
def test_dataset_matches_the_numpy_definition(tok, ratio, prefix_len):
    n, input_len, output_len, seed = 12, 48, 20, 3
    ours = mxserve_dataset(seed, n, input_len, output_len, ratio, prefix_len)
    ref = reference_dataset(tok, seed, n, input_len, output_len, ratio, prefix_len)
    assert ours == ref
    for r in ours:
        assert int(input_len * ratio) + prefix_len <= r["target_prompt_len"] <= input_len + prefix_len
        assert int(output_len * ratio) <= r["output_len"] <= output_len
    if ratio == 1.0:
        assert all(r["target_prompt_len"] == input_len + prefix_len and r["output_len"] == output_len
                   for r in ours)
    else:
        # 12 draws from [24, 48]: the lengths really vary.
        assert len({r["target_prompt_len"] for r in ours}) > 3
    if prefix_len:
        heads = {tuple(tok.encode(r["prompt"])[:3]) for r in ours}
        assert len(heads) == 1  # the shared prefix (its first tokens survive the round trip)


def test_the_seed_changes_the_dataset():
    a = mxserve_dataset(0, 4, 32, 8, 0.5, 0)
    b = mxserve_dataset(1, 4, 32, 8, 0.5, 0)
    assert a != b
    assert a == mxserve_dataset(0, 4, 32, 8, 0.5, 0)
