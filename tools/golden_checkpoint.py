"""Reading an mxserve synth checkpoint with numpy only: safetensors parsing,
exact dequantization of every Linear format (BF16, FP8 128x128 blocks, Quark
MXFP4, compressed-tensors INT4), the MXFP4 activation quantizer of mxfp4.md,
and the checkpoint checksum the C++ golden tests verify.

Shared by golden_logits.py (GPU machine, with torch/transformers) and
golden_numpy_ref.py (anywhere numpy runs)."""
import json
import os
import struct

import numpy as np

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def _fp8_e4m3_table():
    t = np.zeros(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 7
        if e == 15 and m == 7:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * m / 8.0 * 2.0 ** -6
        else:
            t[b] = s * (1 + m / 8.0) * 2.0 ** (e - 7)
    return t


FP8_E4M3 = _fp8_e4m3_table()


def read_safetensors(path):
    """name -> (dtype string, shape, raw bytes view)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], tuple(info["shape"]), data[base + b:base + e])
    return out


def to_array(entry):
    """A stored tensor as float64 (float-like) or its integer type."""
    dtype, shape, raw = entry
    if dtype == "BF16":
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64).reshape(shape)
    if dtype == "F16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float64).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(raw, dtype=np.float32).astype(np.float64).reshape(shape)
    if dtype == "F8_E4M3":
        return FP8_E4M3[np.frombuffer(raw, dtype=np.uint8)].reshape(shape)
    if dtype == "U8":
        return np.frombuffer(raw, dtype=np.uint8).reshape(shape)
    if dtype == "I32":
        return np.frombuffer(raw, dtype=np.int32).reshape(shape)
    raise ValueError(f"unsupported dtype {dtype}")


def dequant_mxfp4(w, s):
    codes = np.stack([w & 0xF, w >> 4], axis=-1).reshape(w.shape[0], w.shape[1] * 2)
    scale = np.exp2(s.astype(np.float64) - 127.0)
    return E2M1[codes] * np.repeat(scale, 32, axis=1)


def dequant_int4(packed, scale, group):
    u = packed.view(np.uint32)
    nib = np.stack([(u >> (4 * j)) & 0xF for j in range(8)], axis=-1).reshape(u.shape[0], u.shape[1] * 8)
    q = nib.astype(np.float64) - 8.0
    return q * np.repeat(scale, group, axis=1)


def dequant_fp8_block(w, s, block=128):
    rows, cols = w.shape
    sc = np.repeat(np.repeat(s, block, axis=0), block, axis=1)[:rows, :cols]
    return w * sc


class Checkpoint:
    """Dequantized float64 weights of a synth checkpoint under their HF names
    (the Kimi-K2.5 "language_model." prefix stripped, vision weights dropped),
    plus which Linears are MXFP4 (their inputs are quantized in W4A4)."""

    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, "config.json")) as f:
            self.raw_config = json.load(f)
        self.text_config = self.raw_config.get("text_config", self.raw_config)
        raw = read_safetensors(os.path.join(directory, "model.safetensors"))
        prefix = "language_model." if any(k.startswith("language_model.") for k in raw) else ""
        self.weights = {}
        self.mxfp4_linears = set()
        for name in raw:
            if not name.startswith(prefix) or name.startswith(("vision_tower.", "mm_projector.")):
                continue
            short = name[len(prefix):]
            if short.endswith((".weight_scale", ".weight_scale_inv", ".weight_shape")):
                continue
            if short.endswith(".weight_packed"):  # compressed-tensors INT4
                base = name[:-len(".weight_packed")]
                scale = to_array(raw[base + ".weight_scale"])
                group = to_array(raw[name]).shape[1] * 8 // scale.shape[1]
                self.weights[short[:-len("_packed")]] = dequant_int4(to_array(raw[name]), scale, group)
                continue
            arr = to_array(raw[name])
            base = name[:-len(".weight")] if name.endswith(".weight") else None
            if base and raw[name][0] == "U8" and base + ".weight_scale" in raw:
                arr = dequant_mxfp4(arr, to_array(raw[base + ".weight_scale"]))
                self.mxfp4_linears.add(short[:-len(".weight")])
            elif base and raw[name][0] == "F8_E4M3":
                arr = dequant_fp8_block(arr, to_array(raw[base + ".weight_scale_inv"]))
            self.weights[short] = arr

    def w(self, name):
        return self.weights[name]


def checksum(directory):
    """sum64 over config.json and model.safetensors (sorted): for each file,
    sum of byte[i] * (1 + i % 65521), wrapping at 2^64, combined with the
    file's size. The C++ golden test computes the same to detect a checkpoint
    that changed since the goldens were made."""
    total = 0
    for fname in sorted(["config.json", "model.safetensors"]):
        b = np.fromfile(os.path.join(directory, fname), dtype=np.uint8).astype(np.uint64)
        weights = (np.arange(b.size, dtype=np.uint64) % np.uint64(65521)) + np.uint64(1)
        with np.errstate(over="ignore"):
            s = int(np.sum(b * weights, dtype=np.uint64))
        total = (total * 1000003 + s + b.size) % (1 << 64)
    return f"{total:016x}"


def mxfp4_qdq(x):
    """Reference MXFP4 activation quantize-dequantize per 32 along the last
    axis (mxfp4.md), on float32 values: amax rounded up to a power of two when
    its mantissa is >= 1.75, e_s = floor(log2 amax') - 2 clamped to
    [-127, 127], E2M1 round-half-even saturating at 6."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    blocks = x.reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1)
    bits = (amax.view(np.uint32).astype(np.uint64) + 0x00200000) & 0xFF800000
    exponent = (bits >> 23).astype(np.int64) - 127
    e_s = np.clip(exponent - 2, -127, 127)
    scaled = blocks.astype(np.float64) * np.exp2(-e_s.astype(np.float64))[:, None]
    q = e2m1_round(scaled)
    return (q * np.exp2(e_s.astype(np.float64))[:, None]).astype(np.float32).reshape(shape)


def e2m1_round(v):
    """Round to the nearest E2M1 value, ties to the even code, saturating at 6."""
    mag = np.minimum(np.abs(v), 6.0)
    grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])
    idx = np.searchsorted(grid, mag, side="left")
    lo = grid[np.clip(idx - 1, 0, 7)]
    hi = grid[np.clip(idx, 0, 7)]
    lo_i = np.clip(idx - 1, 0, 7)
    hi_i = np.clip(idx, 0, 7)
    d_lo = mag - lo
    d_hi = hi - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi_i % 2 == 0))
    out = np.where(pick_hi, hi, lo)
    out = np.where(mag == hi, hi, out)
    return np.sign(v) * out
