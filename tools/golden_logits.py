#!/usr/bin/env python3
"""Golden logits for the CPU backend's golden tests (tests/unit/model/golden_test.cc).

For each case (a `mxserve synth` preset + seed, W4A16 or W4A4) this loads the
checkpoint, dequantizes every weight exactly in Python (golden_checkpoint.py)
and runs:
  * transformers (DeepseekV3ForCausalLM / LlamaForCausalLM, float32 on CPU,
    eager attention) built from the checkpoint's config, with the Kimi-K2.5
    wrapper config mapped to a DeepseekV3Config and `language_model.` stripped;
    W4A4 quantize-dequantizes each MXFP4 Linear's input (golden_checkpoint.mxfp4_qdq);
  * an independent float64 numpy implementation of the equations
    (golden_numpy_ref.py).
The two are compared; the goldens come from transformers when it is available
and agrees, otherwise from numpy (the file says which, and by how much they
differ). Two deliberate alignments of transformers with the engine and the
doc (kimi-k2.5.md §3), recorded in the file: q_a/kv_a_layernorm use
rms_norm_eps (transformers builds them with 1e-6; vLLM and DeepSeek's code use
rms_norm_eps), and group-limited routing masks dropped groups with -inf
(transformers fills 0.0, which only differs when a biased score is negative).

Usage (GPU machine or anywhere with numpy; torch optional):
  mxserve synth --out CKPTS/<preset> --preset <preset> --seed 1   (for each preset)
  python3 tools/golden_logits.py --ckpts CKPTS --out tests/golden
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_checkpoint import Checkpoint, checksum, mxfp4_qdq  # noqa: E402
import golden_numpy_ref  # noqa: E402

SEED = 1
# Llama variant: llama3 RoPE scaling (original context 64 so that the scaled,
# smoothed and kept frequency bands all occur at head_dim 32) and tied embeddings.
LLAMA3_TIED = {"tie_word_embeddings": True,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}
# (case name, synth preset, W4A4, config.json override merged into the synth config)
CASES = [
    ("kimi-k25-mxfp4-w4a16", "kimi-k25-mxfp4", False, None),
    ("kimi-k25-mxfp4-w4a4", "kimi-k25-mxfp4", True, None),
    ("kimi-k25-mxfp4-old-w4a4", "kimi-k25-mxfp4-old", True, None),
    ("kimi-k25-int4", "kimi-k25-int4", False, None),
    ("deepseek-v3-fp8", "deepseek-v3-fp8", False, None),
    ("llama", "llama", False, None),
    ("llama-llama3-rope-tied", "llama", False, LLAMA3_TIED),
]
PROMPTS = [[1, 2, 3, 4, 5, 6, 7], [100, 900, 37, 512, 64, 777, 3, 250, 999, 18, 640], [42]]
GREEDY_TOKENS = 8


def greedy(logits_fn, prompt, n):
    """Greedy continuation without a cache: the full sequence each step.
    Returns tokens, the top1 - top2 margin of each choice, and the prompt's
    last-position logits."""
    ids = list(prompt)
    tokens, margins, first = [], [], None
    for _ in range(n):
        last = np.asarray(logits_fn(ids)[-1], dtype=np.float64)
        if first is None:
            first = last
        order = np.argsort(-last, kind="stable")
        tokens.append(int(order[0]))
        margins.append(float(last[order[0]] - last[order[1]]))
        ids.append(int(order[0]))
    return tokens, margins, first


# ---------------------------------------------------------------- transformers

def hf_config(ckpt):
    import transformers
    c = dict(ckpt.text_config)
    for key in ("quantization_config", "auto_map", "architectures", "model_type", "dtype", "torch_dtype"):
        c.pop(key, None)
    arch = (ckpt.text_config.get("architectures") or [""])[0]
    if "Deepseek" in arch:
        c["rope_interleave"] = True
        return transformers.DeepseekV3Config(**c), transformers.DeepseekV3ForCausalLM
    return transformers.LlamaConfig(**c), transformers.LlamaForCausalLM


def hf_model(ckpt, w4a4):
    """transformers model with the exact dequantized weights, float32, eager."""
    import torch
    from safetensors.torch import save_file
    config, cls = hf_config(ckpt)
    with tempfile.TemporaryDirectory() as d:
        config.save_pretrained(d)
        save_file({k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in ckpt.weights.items()},
                  os.path.join(d, "model.safetensors"))
        common = dict(attn_implementation="eager", output_loading_info=True)
        attempts = [dict(dtype=torch.float32, experts_implementation="eager"), dict(dtype=torch.float32),
                    dict(torch_dtype=torch.float32)]
        res, errors = None, []
        for extra in attempts:  # keyword names moved between transformers versions
            try:
                res = cls.from_pretrained(d, **common, **extra)
                break
            except (TypeError, ValueError) as e:
                errors.append(f"{sorted(extra)}: {e}")
        if res is None:
            raise RuntimeError("from_pretrained failed: " + " | ".join(errors))
    model, info = res if isinstance(res, tuple) else (res, {})
    model = model.float()
    experts = [type(m).__name__ for n, m in model.named_modules() if n.endswith("mlp.experts")][:1]
    print(f"transformers model {type(model).__name__}, experts module {experts}", file=sys.stderr)
    bad = [k for k in info.get("missing_keys", []) if "rotary" not in k] + list(info.get("unexpected_keys", []))
    if bad:
        raise RuntimeError(f"transformers did not load every weight: {sorted(bad)[:8]}")
    model.eval()
    eps = ckpt.text_config.get("rms_norm_eps", 1e-6)
    for name, mod in model.named_modules():
        if name.endswith(("q_a_layernorm", "kv_a_layernorm")):
            mod.variance_epsilon = eps
        if name.endswith("mlp.gate") and hasattr(mod, "get_topk_indices"):
            patch_group_mask(mod)
    check_loaded(model, ckpt)
    check_rope_and_scale(model, ckpt)
    if w4a4:
        install_w4a4(model, ckpt)
    return model


def patch_group_mask(router):
    """Group-limited routing with -inf for dropped groups (kimi-k2.5.md §3)."""
    import torch

    def get_topk_indices(scores):
        choice = scores.view(-1, router.n_routed_experts) + router.e_score_correction_bias.unsqueeze(0)
        ng = router.n_group
        gs = choice.view(-1, ng, router.n_routed_experts // ng).topk(2, dim=-1)[0].sum(dim=-1)
        gidx = torch.topk(gs, k=router.topk_group, dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
        smask = gmask.unsqueeze(-1).expand(-1, ng, router.n_routed_experts // ng).reshape(-1, router.n_routed_experts)
        choice = choice.masked_fill(~smask.bool(), float("-inf"))
        return torch.topk(choice, k=router.top_k, dim=-1, sorted=False)[1]

    router.get_topk_indices = get_topk_indices


def check_loaded(model, ckpt):
    """Every checkpoint weight equals the model's parameter of the same
    content (sum check, robust to transformers fusing experts)."""
    total_model = sum(float(p.detach().double().sum()) for p in model.state_dict().values())
    total_ckpt = sum(float(np.asarray(v, dtype=np.float32).astype(np.float64).sum()) for v in ckpt.weights.values())
    if ckpt.text_config.get("tie_word_embeddings") and "lm_head.weight" not in ckpt.weights:
        total_ckpt += float(ckpt.w("model.embed_tokens.weight").astype(np.float32).sum())
    if abs(total_model - total_ckpt) > 1e-3 * (1 + abs(total_ckpt)):
        raise RuntimeError(f"loaded weights sum {total_model} != checkpoint {total_ckpt}")


def check_rope_and_scale(model, ckpt):
    """transformers' RoPE frequencies, cos/sin factor and MLA softmax scale
    must equal the doc's (golden_numpy_ref); otherwise it is not used."""
    c = ckpt.text_config
    deepseek = "qk_rope_head_dim" in c
    dim = c["qk_rope_head_dim"] if deepseek else (c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])
    inv, af = golden_numpy_ref.rope_table(c, dim)
    seen = 0
    for name, mod in model.named_modules():
        if hasattr(mod, "inv_freq"):
            got = mod.inv_freq.detach().double().cpu().numpy()
            if got.shape != inv.shape or np.max(np.abs(got - inv) / inv) > 1e-5:
                raise RuntimeError(f"{name}.inv_freq differs from the doc's: {got[:4]} vs {inv[:4]}")
            factor = float(getattr(mod, "attention_scaling", 1.0))
            if abs(factor - af) > 1e-6:
                raise RuntimeError(f"{name}.attention_scaling {factor} != {af}")
            seen += 1
        if deepseek and name.endswith("self_attn") and hasattr(mod, "scaling"):
            want = golden_numpy_ref.mla_softmax_scale(c)
            if abs(float(mod.scaling) - want) > 1e-6 * want:
                raise RuntimeError(f"{name}.scaling {mod.scaling} != {want}")
    if not seen:
        raise RuntimeError("no rotary embedding module with inv_freq found")


def qdq_tensor(x):
    import torch
    return torch.from_numpy(mxfp4_qdq(x.detach().cpu().float().numpy())).to(x.dtype)


def install_w4a4(model, ckpt):
    """Quantize-dequantize the input of each MXFP4 Linear (nn.Linear modules
    via a pre-hook; experts fused into 3-D parameters by a wrapper)."""
    import torch
    hooked = 0
    mx_names = set(ckpt.mxfp4_linears)
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name in mx_names:
            mod.register_forward_pre_hook(lambda m, args: (qdq_tensor(args[0]),) + tuple(args[1:]))
            hooked += 1
        elif hasattr(mod, "gate_up_proj") and isinstance(getattr(mod, "gate_up_proj"), torch.nn.Parameter):
            if any(n.startswith(name + ".") for n in mx_names):
                mod.forward = fused_experts_w4a4(mod)
                hooked += sum(1 for n in mx_names if n.startswith(name + "."))
    if hooked != len(mx_names):
        raise RuntimeError(f"W4A4: hooked {hooked} of {len(mx_names)} MXFP4 Linears")


def fused_experts_w4a4(mod):
    import torch

    def forward(hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        for t in range(hidden_states.shape[0]):
            for j in range(top_k_index.shape[1]):
                e = int(top_k_index[t, j])
                x = qdq_tensor(hidden_states[t:t + 1])
                gate, up = torch.nn.functional.linear(x, mod.gate_up_proj[e]).chunk(2, dim=-1)
                h = qdq_tensor(torch.nn.functional.silu(gate) * up)
                out[t] += top_k_weights[t, j] * torch.nn.functional.linear(h, mod.down_proj[e])[0]
        return out

    return forward


def hf_logits_fn(model):
    import torch

    def fn(ids):
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].double().numpy()

    return fn


# ---------------------------------------------------------------- main

def run_case(name, preset, w4a4, override, ckpt_root, use_torch, hf_error=None):
    d = os.path.join(ckpt_root, preset)
    ckpt = Checkpoint(d)
    if override:
        ckpt.text_config.update(override)
    if ckpt.text_config.get("tie_word_embeddings"):
        ckpt.weights.pop("lm_head.weight", None)  # tied: the head is the embedding
    ref = golden_numpy_ref.make_model(ckpt, w4a4)
    source, fn = "numpy float64 (tools/golden_numpy_ref.py)", ref.logits
    if use_torch:
        try:
            import transformers
            model = hf_model(ckpt, w4a4)
            fn = hf_logits_fn(model)
            source = f"transformers {transformers.__version__} {type(model).__name__} float32 cpu eager"
        except Exception as e:  # recorded in the golden file, numpy stays the reference
            hf_error = f"{type(e).__name__}: {e}"
            print(f"[{name}] transformers unavailable: {hf_error}", file=sys.stderr)
    prompts = []
    max_diff = 0.0
    for p in PROMPTS:
        tokens, margins, last = greedy(fn, p, GREEDY_TOKENS)
        if fn is not ref.logits:
            other = ref.logits(p)[-1]
            diff = float(np.max(np.abs(other - last)))
            max_diff = max(max_diff, diff)
            bound = (2e-3 if w4a4 else 1e-4) * (1 + float(np.max(np.abs(other))))
            if diff > bound:  # transformers disagrees with the equations: keep numpy
                hf_error = f"transformers differs from the numpy reference by {diff:.3g} (> {bound:.3g})"
                print(f"[{name}] {hf_error}", file=sys.stderr)
                return run_case(name, preset, w4a4, override, ckpt_root, False, hf_error)
        prompts.append({"ids": p, "greedy": tokens, "greedy_margins": [round(m, 6) for m in margins],
                        "last_logits": [float(f"{v:.7g}") for v in last]})
    return {
        "case": name, "preset": preset, "seed": SEED, "activations": "W4A4" if w4a4 else "W4A16",
        "config_override": override,
        "checkpoint_checksum": checksum(d), "reference": source,
        "numpy_vs_reference_max_abs_diff": max_diff if fn is not ref.logits else 0.0,
        "transformers_error": hf_error,
        "alignments": "q_a/kv_a_layernorm eps = rms_norm_eps; dropped routing groups masked with -inf",
        "vocab_size": len(prompts[0]["last_logits"]), "prompts": prompts,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpts", required=True, help="directory with one synth checkpoint per preset name")
    ap.add_argument("--out", required=True, help="where <case>.json goldens go")
    ap.add_argument("--numpy-only", action="store_true", help="skip transformers")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    wanted = set(filter(None, args.cases.split(",")))
    for name, preset, w4a4, override in CASES:
        if wanted and name not in wanted:
            continue
        t0 = time.time()
        g = run_case(name, preset, w4a4, override, args.ckpts, not args.numpy_only)
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(g, f, separators=(",", ":"))
        print(f"{name}: {g['reference']}; numpy diff {g['numpy_vs_reference_max_abs_diff']:.3g}; "
              f"greedy {[p['greedy'] for p in g['prompts']]}; {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
