#!/usr/bin/env python3
"""Per-layer breakdown of a `mxserve serve --profile-ops` log of a Kimi-K2.5-shaped
model (scripts/gpu_kimi_bench.sh), as markdown, with an extrapolation to the
real model (61 layers) on 8 GPUs stated as a model, not a measurement.

  kimi_profile_table.py SERVE_LOG --layers L --tp T [--rank 0]

Rows of the profile are grouped by what they compute:
  attention: the MLA projections (self_attn.*), rope, KV store, the attention
             kernels and the small layout ops around them;
  MoE:       router (mlp.gate), routing, fused MoE (routed experts), shared experts;
  dense MLP: layer 0's mlp.gate_proj/up_proj/down_proj (first_k_dense_replace = 1);
  all-reduce: the two per layer (tensor parallelism);
  head:      embedding, final norm share, lm_head, logits copy.
Per layer = group total per step / layers (MoE: / (layers - 1)).

Extrapolation to 61 layers and TP=8, decode: at these batch sizes every
sharded weight is read once per step, so a layer's MoE and sharded-projection
time is taken to scale with its bytes per GPU (T/8 of the measured); the latent
KV cache is replicated on every rank (one KV head), so MLA attention kernel
time does not shrink; all-reduce and other per-layer time are kept as measured;
the head (replicated) is kept. This is an estimate from the measured rows, not
a measurement of 8 GPUs.
"""
import argparse
import re
import sys

SHARDED = ("self_attn.q_b_proj", "self_attn.kv_b_proj", "self_attn.o_proj")


def parse(log, rank):
    """{kind: {"steps": n, "seqs": s, "tokens": t, "span": ms, "rows": {name: (calls, ms)}}} per step."""
    kinds, current, inside = {}, None, False
    for line in open(log, errors="replace"):
        if "op profile (" in line:
            inside = f"rank {rank};" in line
            current = None
            continue
        if not inside:
            continue
        m = re.match(r"  (\S.*?) steps: (\d+), ([\d.]+) sequences and ([\d.]+) new tokens per step; span ([\d.]+) ms", line)
        if m:
            current = kinds.setdefault(m.group(1), {"steps": int(m.group(2)), "seqs": float(m.group(3)),
                                                     "tokens": float(m.group(4)), "span": float(m.group(5)),
                                                     "rows": {}})
            continue
        m = re.match(r"    (.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)$", line.rstrip())
        if m and current is not None and m.group(1) != "op":
            current["rows"][m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
        elif not line.startswith("    "):
            inside = inside and line.startswith("  ")
    return kinds


def group_of(name):
    if name == "all_reduce":
        return "all-reduce"
    if name.startswith("linear self_attn") or name in ("rope", "store_kv", "paged_attention", "paged_attention (latent)",
                                                      "attention", "gather_cached_k", "head_matmul", "concat_cols",
                                                      "slice_cols", "scatter_rows"):
        return "attention"
    if name.startswith("linear mlp.shared_experts") or name in ("fused_moe", "route_noaux_tc", "route_softmax",
                                                               "linear mlp.gate", "add_inplace", "axpy_inplace"):
        return "MoE"
    if name.startswith("linear mlp."):
        return "dense MLP"
    if name in ("embedding", "to_host") or "lm_head" in name:
        return "head"
    return "norms/other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--rank", type=int, default=0)
    a = ap.parse_args()
    kinds = parse(a.log, a.rank)
    if not kinds:
        print(f"no op profile of rank {a.rank} in {a.log}")
        return 1
    L, moe_layers = a.layers, max(a.layers - 1, 1)
    print(f"## Op profile, rank {a.rank} (device time per step, ms; {L} layers, TP={a.tp})\n")
    groups = ["attention", "MoE", "dense MLP", "all-reduce", "norms/other", "head"]
    print("| step kind | steps | seqs/step | new tokens/step | span ms | " + " | ".join(groups) +
          " | host gaps |")
    print("|---|---|---|---|---|" + "---|" * (len(groups) + 1))
    summary = {}
    for kind, k in kinds.items():
        if k["steps"] == 0:
            continue
        g = {x: 0.0 for x in groups}
        for name, (_, ms) in k["rows"].items():
            g[group_of(name)] += ms
        gaps = max(0.0, k["span"] - sum(g.values()))
        summary[kind] = (k, g, gaps)
        print(f"| {kind} | {k['steps']} | {k['seqs']:.1f} | {k['tokens']:.1f} | {k['span']:.3f} | " +
              " | ".join(f"{g[x]:.3f}" for x in groups) + f" | {gaps:.3f} |")
    print(f"\n## Per layer (decode; ms per step per layer: attention and all-reduce / {L}, MoE / {moe_layers})\n")
    print("| step kind | attention | MoE (routed + shared) | all-reduce | norms/other | layer total |")
    print("|---|---|---|---|---|---|")
    for kind, (k, g, _) in summary.items():
        att, moe, ar, oth = g["attention"] / L, g["MoE"] / moe_layers, g["all-reduce"] / L, g["norms/other"] / L
        print(f"| {kind} | {att:.3f} | {moe:.3f} | {ar:.3f} | {oth:.3f} | {att + moe + ar + oth:.3f} |")
    print(f"\n## Extrapolation to 61 layers on 8 GPUs (TP=8), decode: an estimate, not a measurement\n")
    print("Model (see the script's docstring): MoE and the sharded attention projections scale with their bytes "
          f"per GPU ({a.tp}/8 of the measured); the MLA attention kernel (replicated latent KV), the replicated "
          "projections (q_a, kv_a), all-reduce, norms and the head are kept as measured.\n")
    print("| step kind | seqs/step | est. decode step ms (61 layers) | est. TPOT ms if no prefill interleaves | est. decode output tok/s |")
    print("|---|---|---|---|---|")
    scale = a.tp / 8
    for kind, (k, g, gaps) in summary.items():
        if not kind.startswith("decode"):
            continue
        rows = k["rows"]
        sharded = sum(ms for n, (_, ms) in rows.items() if any(n.endswith(s) for s in SHARDED))
        att_fixed = g["attention"] - sharded
        per_layer = (att_fixed + sharded * scale + g["all-reduce"] + g["norms/other"]) / L
        per_moe_layer = g["MoE"] * scale / moe_layers
        dense = g["dense MLP"] * scale
        step = g["head"] + dense + 61 * per_layer + 60 * per_moe_layer + gaps * 61 / L
        print(f"| {kind} | {k['seqs']:.1f} | {step:.2f} | {step:.2f} | {k['seqs'] * 1000 / step:.0f} |")
    if "prefill/mixed" in summary:
        k, g, gaps = summary["prefill/mixed"]
        # Prefill is compute-bound: every group but the head and the all-reduce
        # splits over the ranks (attention by heads; q_a/kv_a are replicated but
        # small), so per-GPU time scales with T/8.
        per_layer = ((g["attention"] + g["all-reduce"] / scale + g["norms/other"]) * scale + gaps) / L
        per_moe_layer = g["MoE"] * scale / moe_layers
        step = g["head"] + g["dense MLP"] * scale + 61 * per_layer + 60 * per_moe_layer
        per_token = step / k["tokens"]
        print(f"\nPrefill/mixed steps ({k['tokens']:.0f} new tokens per step measured): est. {step:.1f} ms per step "
              f"at 61 layers and TP=8, {per_token * 1000:.1f} us per prompt token, i.e. ~{1000 / per_token:,.0f} prompt "
              f"tokens/s and ~{10240 * per_token / 1000:.2f} s for one 10,240-token prompt alone (same scaling "
              "model; all-reduce kept as measured).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
