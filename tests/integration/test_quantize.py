"""`mxserve quantize` round trip: a small GGUF Llama (written here byte by byte)
becomes a Quark-format MXFP4 checkpoint; every quantized Linear must equal an
independent numpy implementation of the reference block quantizer bit for bit,
everything else must come through unchanged (Q/K rows back in HF order), and
config.json must carry the amd/Kimi-K2.5-MXFP4 quantization_config fields."""
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

BINARY = os.environ.get("MXSERVE_BINARY", str(Path(__file__).resolve().parents[2] / "build" / "mxserve"))

HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, LAYERS = 64, 4, 2, 96, 40, 2
HEAD_DIM = HIDDEN // HEADS


# ---------------------------------------------------------------- GGUF writer
def _str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, payload):
    return _str(key) + struct.pack("<I", vtype) + payload


def _kv_u32(k, v):
    return _kv(k, 4, struct.pack("<I", v))


def _kv_f32(k, v):
    return _kv(k, 6, struct.pack("<f", v))


def _kv_strs(k, items):
    return _kv(k, 9, struct.pack("<IQ", 8, len(items)) + b"".join(_str(s) for s in items))


def write_gguf(path, kvs, tensors, alignment=32):
    """tensors: list of (name, ne list (innermost first), ggml type, bytes)."""
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs)) + b"".join(kvs)
    infos, data, off = b"", b"", 0
    for name, ne, gtype, raw in tensors:
        infos += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", gtype, len(data))
        data += raw + b"\0" * (-len(raw) % alignment)
    blob = head + infos
    blob += b"\0" * (-len(blob) % alignment)
    Path(path).write_bytes(blob + data)


def bf16_round(x):
    """float32 -> nearest-even bfloat16, returned as float32 values and uint16 bits."""
    bits = x.astype(np.float32).view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32), bits


def permute_qk(w, n_head):
    """llama.cpp convert's row permutation of q/k for RoPE (HF -> GGUF order)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make_model(path, rng):
    ref = {}
    tensors = []

    def add(hf, gguf, shape, ggml_permute=None, dtype="bf16"):
        x = rng.standard_normal(shape).astype(np.float32) * 0.05
        x[0, :3] = [0.0, -0.0, 1e-3] if x.ndim == 2 else x[0, :3]  # zero blocks start, sign of zero
        vals, bits = bf16_round(x)
        ref[hf] = vals
        stored = bits if ggml_permute is None else permute_qk(bits, ggml_permute)
        if dtype == "f32":
            stored = vals if ggml_permute is None else permute_qk(vals, ggml_permute)
            tensors.append((gguf, list(reversed(shape)), 0, stored.astype(np.float32).tobytes()))
        else:
            tensors.append((gguf, list(reversed(shape)), 30, stored.tobytes()))

    add("model.embed_tokens.weight", "token_embd.weight", (VOCAB, HIDDEN))
    for i in range(LAYERS):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        add(p + "self_attn.q_proj.weight", b + "attn_q.weight", (HIDDEN, HIDDEN), HEADS)
        add(p + "self_attn.k_proj.weight", b + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), KV_HEADS, "f32")
        add(p + "self_attn.v_proj.weight", b + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN))
        add(p + "self_attn.o_proj.weight", b + "attn_output.weight", (HIDDEN, HIDDEN))
        add(p + "mlp.gate_proj.weight", b + "ffn_gate.weight", (FFN, HIDDEN))
        add(p + "mlp.up_proj.weight", b + "ffn_up.weight", (FFN, HIDDEN), dtype="f32")
        add(p + "mlp.down_proj.weight", b + "ffn_down.weight", (HIDDEN, FFN))
        for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm")):
            w = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
            ref[p + hf + ".weight"] = w
            tensors.append((b + gg + ".weight", [HIDDEN], 0, w.tobytes()))
    # An adversarial block: ties at E2M1 midpoints, an outlier, subnormal-range values.
    gate = ref["model.layers.0.mlp.gate_proj.weight"]
    gate[1, :32] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0] * 4, np.float32) * np.where(np.arange(32) % 2, -1, 1)
    gate[2, :32] = 2.0 ** -130
    gate[3, :32] = 0.0
    gate[3, 5] = 7.0  # mantissa 1.75 -> amax rounds up
    tensors[[t[0] for t in tensors].index("blk.0.ffn_gate.weight")] = (
        "blk.0.ffn_gate.weight", [HIDDEN, FFN], 30, bf16_round(gate)[1].tobytes())
    norm = np.ones(HIDDEN, np.float32)
    ref["model.norm.weight"] = norm
    tensors.append(("output_norm.weight", [HIDDEN], 0, norm.tobytes()))
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(ord("a") + i % 26) * (1 + i // 26) for i in range(VOCAB - 3)]
    kvs = [
        _kv("general.architecture", 8, _str("llama")),
        _kv_u32("llama.embedding_length", HIDDEN), _kv_u32("llama.block_count", LAYERS),
        _kv_u32("llama.attention.head_count", HEADS), _kv_u32("llama.attention.head_count_kv", KV_HEADS),
        _kv_u32("llama.feed_forward_length", FFN), _kv_u32("llama.context_length", 256),
        _kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5), _kv_f32("llama.rope.freq_base", 10000.0),
        _kv("tokenizer.ggml.model", 8, _str("gpt2")), _kv("tokenizer.ggml.pre", 8, _str("smollm")),
        _kv_strs("tokenizer.ggml.tokens", tokens), _kv_strs("tokenizer.ggml.merges", []),
        _kv_u32("tokenizer.ggml.bos_token_id", 1), _kv_u32("tokenizer.ggml.eos_token_id", 2),
        _kv("tokenizer.chat_template", 8, _str("{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}")),
    ]
    write_gguf(path, kvs, tensors)
    return ref


# ------------------------------------------------------- reference quantizer
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)


def e2m1_rne(v):
    """Nearest E2M1 code (ties to the even code), saturating at 6; sign bit kept."""
    a = np.abs(v).astype(np.float64)
    d = np.abs(a[..., None] - E2M1)
    nearest = d == d.min(axis=-1, keepdims=True)  # exact: values and grid are dyadic
    even = (np.arange(8) % 2) == 0
    # A tie is always between neighbouring codes, one of them even: take it.
    code = np.where((nearest & even).any(axis=-1), np.argmax(nearest & even, axis=-1), np.argmax(nearest, axis=-1))
    code = code.astype(np.uint8)
    return code | (np.signbit(v).astype(np.uint8) << 3)


def reference_mxfp4(w):
    """OCP MX per-32 blocks, the documented rule: amax rounded up to a power of two
    when its mantissa >= 1.75, e = floor(log2 amax') - 2 in [-127, 127]."""
    rows, cols = w.shape
    blocks = w.reshape(rows, cols // 32, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=-1)
    bits = (amax.view(np.uint32) + 0x00200000) & 0xFF800000
    field = (bits >> 23).astype(np.int64)
    e = np.where(field == 0, -127, np.clip(field - 127 - 2, -127, 127))
    q = e2m1_rne(blocks.astype(np.float64) / np.exp2(e)[..., None])
    q = q.reshape(rows, cols)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    return packed, (e + 127).astype(np.uint8)


def dequantize(packed, scale):
    lo, hi = packed & 0xF, packed >> 4
    codes = np.stack([lo, hi], axis=-1).reshape(packed.shape[0], -1)
    vals = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    return vals * np.exp2(np.repeat(scale.astype(np.float64) - 127, 32, axis=1))


# ------------------------------------------------------------ safetensors
DTYPES = {"BF16": np.uint16, "F32": np.float32, "U8": np.uint8, "F16": np.float16}


def read_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b:8 + n + end], DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = (e["dtype"], arr)
    return out


def as_f32(dtype, arr):
    return (arr.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else arr.astype(np.float32)


def quantize(tmp_path, *extra):
    rng = np.random.default_rng(1234)
    ref = make_model(tmp_path / "tiny.gguf", rng)
    out = tmp_path / "out"
    r = subprocess.run([BINARY, "quantize", "--in", str(tmp_path / "tiny.gguf"), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return ref, out, r


def test_default_exclusions_and_bit_exact_weights(tmp_path):
    ref, out, r = quantize(tmp_path)
    st = read_safetensors(out / "model.safetensors")
    mlp = [n for n in ref if ".mlp." in n]
    assert len(mlp) == 3 * LAYERS
    for name in mlp:
        layer = name[: -len(".weight")]
        wd, w = st[name]
        sd, s = st[layer + ".weight_scale"]
        assert (wd, sd) == ("U8", "U8")
        rows, cols = ref[name].shape
        assert w.shape == (rows, cols // 2) and s.shape == (rows, cols // 32)
        want_w, want_s = reference_mxfp4(ref[name])
        np.testing.assert_array_equal(s, want_s, err_msg=name)
        np.testing.assert_array_equal(w, want_w, err_msg=name)
        np.testing.assert_array_equal(dequantize(w, s), dequantize(want_w, want_s))
    # The adversarial rows of layer 0's gate: ties went to even codes, 7.0 rounded amax up.
    w, s = st["model.layers.0.mlp.gate_proj.weight"][1], st["model.layers.0.mlp.gate_proj.weight_scale"][1]
    assert s[3, 0] == 127 + 1  # amax 7 -> 8 -> e = 3 - 2
    assert s[2, 0] == 0        # subnormal block -> smallest scale
    # Everything else unchanged, attention Q/K back in HF row order.
    for name, want in ref.items():
        if name in mlp:
            continue
        dtype, arr = st[name]
        assert not (name.replace(".weight", ".weight_scale") in st), name
        np.testing.assert_array_equal(as_f32(dtype, arr), want, err_msg=name)
    assert "lm_head.weight" not in st  # tied embeddings stay tied


def test_config_matches_the_quark_export(tmp_path):
    _, out, _ = quantize(tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (
        HIDDEN, LAYERS, HEADS, KV_HEADS)
    assert cfg["tie_word_embeddings"] is True and cfg["bos_token_id"] == 1 and cfg["eos_token_id"] == 2
    q = cfg["quantization_config"]
    assert q["quant_method"] == "quark" and q["quant_mode"] == "eager_mode"
    w = q["global_quant_config"]["weight"]
    assert w == {"dtype": "fp4", "qscheme": "per_group", "ch_axis": -1, "group_size": 32, "is_dynamic": False,
                 "scale_format": "e8m0", "scale_type": "float", "scale_calculation_mode": "even",
                 "round_method": "half_even", "symmetric": None, "mx_element_dtype": None,
                 "observer_cls": "PerBlockMXObserver", "is_scale_quant": False}
    assert q["global_quant_config"]["input_tensors"] == dict(w, is_dynamic=True)
    assert q["export"]["weight_format"] == "real_quantized" and q["export"]["pack_method"] == "reorder"
    assert q["exclude"] == ["lm_head", "re:.*embed_tokens.*", "re:.*self_attn.*", "re:.*\\.gate$",
                            "re:.*vision_tower.*", "re:.*mm_projector.*"]
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert tok_cfg["bos_token"] == "<|im_start|>" and tok_cfg["eos_token"] == "<|im_end|>"
    assert "<|im_start|>" in tok_cfg["chat_template"]
    assert (out / "tokenizer.gguf").read_bytes()[:4] == b"GGUF"


def test_exclusions_are_selectable(tmp_path):
    ref, out, _ = quantize(tmp_path, "--no-default-excludes", "--exclude", "re:.*down_proj",
                           "--exclude", "model.layers.1.self_attn.v_proj", "--activations", "none")
    st = read_safetensors(out / "model.safetensors")
    assert st["model.layers.0.self_attn.q_proj.weight"][0] == "U8"       # attention now quantized
    assert st["model.embed_tokens.weight"][0] == "U8"                     # so is the embedding (no defaults)
    assert st["model.layers.1.mlp.down_proj.weight"][0] == "BF16"          # regex exclude
    assert st["model.layers.1.self_attn.v_proj.weight"][0] == "BF16"       # exact-name exclude
    assert st["model.layers.0.self_attn.v_proj.weight"][0] == "U8"
    w, s = st["model.layers.0.self_attn.q_proj.weight"][1], st["model.layers.0.self_attn.q_proj.weight_scale"][1]
    want_w, want_s = reference_mxfp4(ref["model.layers.0.self_attn.q_proj.weight"])
    np.testing.assert_array_equal(w, want_w)
    np.testing.assert_array_equal(s, want_s)
    q = json.loads((out / "config.json").read_text())["quantization_config"]
    assert q["global_quant_config"]["input_tensors"] is None
    assert q["exclude"] == ["re:.*down_proj", "model.layers.1.self_attn.v_proj"]


def test_bad_arguments_are_refused(tmp_path):
    r = subprocess.run([BINARY, "quantize", "--in", str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr
    make_model(tmp_path / "t.gguf", np.random.default_rng(0))
    r = subprocess.run([BINARY, "quantize", "--in", str(tmp_path / "t.gguf"), "--out", str(tmp_path / "o"),
                        "--format", "nvfp4"], capture_output=True, text=True)
    assert r.returncode == 2 and "only mxfp4" in r.stderr
    r = subprocess.run([BINARY, "quantize", "--in", str(tmp_path / "t.gguf"), "--out", str(tmp_path / "o"),
                        "--exclude", "re:(["], capture_output=True, text=True)
    assert r.returncode == 2 and "not a valid regular expression" in r.stderr
    (tmp_path / "bad.gguf").write_bytes(b"GGUF\x02\0\0\0" + b"\0" * 16)
    r = subprocess.run([BINARY, "quantize", "--in", str(tmp_path / "bad.gguf"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "version 2 is not supported" in r.stderr


def test_engine_loads_the_quantized_checkpoint(tmp_path):
    """Through WeightLoader: the formats it decides per tensor match what was
    written, and the Llama model runs the checkpoint in both activation modes."""
    _, out, _ = quantize(tmp_path)
    r = subprocess.run([BINARY, "inspect", "--model", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "quark" in r.stdout
    assert f"mxfp4: {3 * LAYERS} linears" in r.stdout, r.stdout
    assert f"bf16: {4 * LAYERS} linears" in r.stdout, r.stdout
    for extra in ([], ["--w4a4"]):
        g = subprocess.run([BINARY, "generate", "--model", str(out), "--prompt-ids", "3,4,5,6", "--max-tokens", "4",
                            "--ignore-eos", *extra], capture_output=True, text=True, timeout=120)
        assert g.returncode == 0, g.stderr
        ids = [int(x) for x in g.stdout.splitlines()[0].split(",")]
        assert len(ids) == 4 and all(0 <= i < VOCAB for i in ids)
