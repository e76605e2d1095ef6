#!/usr/bin/env python3
"""Merges the bench's JSON lines with the peers' into the final markdown table."""
import json, sys

ours = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peers = [json.loads(l) for l in open(sys.argv[2]) if l.strip()] if len(sys.argv) > 2 else []
gemm_peer = {(p["shape"], p["M"]): p for p in peers if p.get("what") == "gemm"}
moe_peer = {p["T"]: p for p in peers if p.get("what") == "moe"}

print("| kernel | shape | M/T | mode | ours us | floor us | ours/floor | rel err | unwritten | peer us | peer/ours | note |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in ours:
    peer, peer_name = None, ""
    if r["kernel"] == "gemm":
        p = gemm_peer.get((r["shape"].split()[0], r["M"]))
        if p:
            peer = min(p["triton_us"], p["cublas_bf16_us"])
            peer_name = "triton %.1f / cublas-bf16 %.1f" % (p["triton_us"], p["cublas_bf16_us"])
    elif r["kernel"] == "fused_moe":
        p = moe_peer.get(r["M"])
        if p:
            peer = p["torch_bf16_grouped_us"]
            peer_name = "torch bf16 grouped %.1f" % peer
            if r["M"] >= 512 and "torch_tflops" in p:
                peer_name += " (%.0f TFLOP/s)" % p["torch_tflops"]
    ratio = "%.2f" % (r["us"] / r["floor_us"]) if r["floor_us"] > 0 else ""
    vs = "%.2f" % (peer / r["us"]) if peer and r["us"] > 0 else ""
    err = "%.2e" % r["rel_err"] if r["rel_err"] >= 0 else ""
    print(f"| {r['kernel']} | {r['shape']} | {r['M']} | {r['mode']} | {r['us']:.2f} | {r['floor_us']:.2f} | "
          f"{ratio} | {err} | {r['unwritten']} | {peer_name} | {vs} | {r['note']} |")
