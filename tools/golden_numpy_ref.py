"""An independent float64 numpy implementation of the forward pass of
kimi-k2.5.md §3 (DeepSeek-V3 / Kimi MLA + MoE) and of Llama, written from the
equations (no transformers). golden_logits.py cross-checks transformers
against it; it also runs where torch is missing."""
import math

import numpy as np

from golden_checkpoint import mxfp4_qdq


def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(s):
    s = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(s)
    return e / np.sum(e, axis=-1, keepdims=True)


def yarn_mscale(factor, mscale):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_table(cfg, dim):
    """inv_freq and cos/sin factor, as transformers' rope initializers."""
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    factor = rs.get("factor", 1.0)
    attention_factor = 1.0
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        bf, bs = rs.get("beta_fast", 32), rs.get("beta_slow", 1)

        def corr(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))

        low = max(math.floor(corr(bf)), 0)
        high = min(math.ceil(corr(bs)), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
        inv = inv * (1 - ramp) + inv / factor * ramp
        m, mad = rs.get("mscale"), rs.get("mscale_all_dim")
        attention_factor = yarn_mscale(factor, m) / yarn_mscale(factor, mad) if (m and mad) else yarn_mscale(factor, 1)
    elif kind == "llama3":
        old = rs["original_max_position_embeddings"]
        lf, hf = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        wl = 2 * math.pi / inv
        out = np.where(wl > old / lf, inv / factor, inv)
        smooth = (old / wl - lf) / (hf - lf)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wl < old / hf) & ~(wl > old / lf)
        inv = np.where(medium, smoothed, out)
    elif kind == "linear":
        inv = inv / factor
    return inv, attention_factor


def rope(x, pos, inv, af, interleaved):
    """x [..., T, d]: rotate pairs (2i, 2i+1) or (i, i+d/2) by pos * inv_freq."""
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang) * af, np.sin(ang) * af
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = b * c + a * s
        return out
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def causal_attention(q, k, v, scale):
    """q [H, T, d], k [H, T, d], v [H, T, dv] -> [T, H * dv]."""
    t = q.shape[1]
    s = np.einsum("htd,hsd->hts", q, k) * scale
    s = np.where(np.tril(np.ones((t, t), dtype=bool)), s, -np.inf)
    o = np.einsum("hts,hsd->htd", softmax(s), v)
    return o.transpose(1, 0, 2).reshape(t, -1)


class Model:
    def __init__(self, ckpt, w4a4):
        self.ck = ckpt
        self.cfg = ckpt.text_config
        self.w4a4 = w4a4
        self.eps = self.cfg.get("rms_norm_eps", 1e-6)

    def linear(self, x, name):
        if self.w4a4 and name in self.ck.mxfp4_linears:
            x = mxfp4_qdq(x.astype(np.float32)).astype(np.float64)
        return x @ self.ck.w(name + ".weight").T

    def mlp(self, x, p):
        return self.linear(silu(self.linear(x, p + ".gate_proj")) * self.linear(x, p + ".up_proj"), p + ".down_proj")

    def logits(self, ids):
        """Logits of every position for one sequence (positions 0..T-1)."""
        c = self.cfg
        x = self.ck.w("model.embed_tokens.weight")[np.asarray(ids)]
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = rms_norm(x, self.ck.w(p + "input_layernorm.weight"), self.eps)
            x = x + self.attention(h, p + "self_attn")
            h = rms_norm(x, self.ck.w(p + "post_attention_layernorm.weight"), self.eps)
            x = x + self.ffn(h, layer, p + "mlp")
        x = rms_norm(x, self.ck.w("model.norm.weight"), self.eps)
        tied = self.cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in self.ck.weights
        head = self.ck.w("model.embed_tokens.weight") if tied else self.ck.w("lm_head.weight")
        return x @ head.T


class Llama(Model):
    def attention(self, h, p):
        c = self.cfg
        t, nh = h.shape[0], c["num_attention_heads"]
        nkv = c.get("num_key_value_heads", nh)
        d = c.get("head_dim") or c["hidden_size"] // nh
        inv, af = rope_table(c, d)
        q = self.linear(h, p + ".q_proj").reshape(t, nh, d).transpose(1, 0, 2)
        k = self.linear(h, p + ".k_proj").reshape(t, nkv, d).transpose(1, 0, 2)
        v = self.linear(h, p + ".v_proj").reshape(t, nkv, d).transpose(1, 0, 2)
        q, k = rope(q, range(t), inv, af, False), rope(k, range(t), inv, af, False)
        k, v = np.repeat(k, nh // nkv, axis=0), np.repeat(v, nh // nkv, axis=0)
        return self.linear(causal_attention(q, k, v, 1 / math.sqrt(d)), p + ".o_proj")

    def ffn(self, h, layer, p):
        return self.mlp(h, p)


class DeepseekV3(Model):
    def attention(self, h, p):
        c = self.cfg
        t, nh = h.shape[0], c["num_attention_heads"]
        nope, rd, vd, kvr = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
        inv, af = rope_table(c, rd)
        if c.get("q_lora_rank"):
            q = self.linear(rms_norm(self.linear(h, p + ".q_a_proj"), self.ck.w(p + ".q_a_layernorm.weight"), self.eps),
                            p + ".q_b_proj")
        else:
            q = self.linear(h, p + ".q_proj")
        q = q.reshape(t, nh, nope + rd).transpose(1, 0, 2)
        a = self.linear(h, p + ".kv_a_proj_with_mqa")
        c_kv = rms_norm(a[:, :kvr], self.ck.w(p + ".kv_a_layernorm.weight"), self.eps)
        k_pe = rope(a[None, :, kvr:], range(t), inv, af, True)  # [1, T, rd], shared by all heads
        q_pe = rope(q[:, :, nope:], range(t), inv, af, True)
        kv = self.linear(c_kv, p + ".kv_b_proj").reshape(t, nh, nope + vd).transpose(1, 0, 2)
        qf = np.concatenate([q[:, :, :nope], q_pe], axis=-1)
        kf = np.concatenate([kv[:, :, :nope], np.repeat(k_pe, nh, axis=0)], axis=-1)
        return self.linear(causal_attention(qf, kf, kv[:, :, nope:], mla_softmax_scale(c)), p + ".o_proj")

    def ffn(self, h, layer, p):
        c = self.cfg
        moe = c.get("n_routed_experts") and layer >= c.get("first_k_dense_replace", 0) and \
            layer % c.get("moe_layer_freq", 1) == 0
        if not moe:
            return self.mlp(h, p)
        ne, k = c["n_routed_experts"], c["num_experts_per_tok"]
        ng, tg = c.get("n_group", 1) or 1, c.get("topk_group", 1) or 1
        logits = self.linear(h, p + ".gate")
        scores = 1 / (1 + np.exp(-logits))
        bias = self.ck.weights.get(p + ".gate.e_score_correction_bias", np.zeros(ne))
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            choice = scores[t] + bias
            if ng > 1:
                g = choice.reshape(ng, ne // ng)
                gs = np.sort(g, axis=1)[:, -2:].sum(axis=1)
                keep = np.argsort(-gs, kind="stable")[:tg]
                mask = np.full(ng, True)
                mask[keep] = False
                choice = np.where(np.repeat(mask, ne // ng), -np.inf, choice)
            idx = np.argsort(-choice, kind="stable")[:k]
            wts = scores[t, idx]
            if c.get("norm_topk_prob", True):
                wts = wts / (wts.sum() + 1e-20)
            wts = wts * c.get("routed_scaling_factor", 1.0)
            for e, wt in zip(idx, wts):
                out[t] += wt * self.mlp(h[t:t + 1], f"{p}.experts.{e}")[0]
        if c.get("n_shared_experts"):
            out = out + self.mlp(h, p + ".shared_experts")
        return out


def mla_softmax_scale(c):
    """tau = (nope + rope)^-1/2 * m^2 with YaRN's m from mscale_all_dim."""
    scale = 1 / math.sqrt(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
    rs = c.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type", "default")) != "default" and rs.get("mscale_all_dim"):
        m = yarn_mscale(rs["factor"], rs["mscale_all_dim"])
        scale *= m * m
    return scale


def make_model(ckpt, w4a4):
    arch = (ckpt.text_config.get("architectures") or [""])[0]
    mt = ckpt.text_config.get("model_type", "")
    if "Deepseek" in arch or mt in ("deepseek_v3", "kimi_k2", "kimi_k25"):
        return DeepseekV3(ckpt, w4a4)
    return Llama(ckpt, w4a4)
