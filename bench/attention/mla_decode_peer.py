"""Peer for bench/attention/mla_decode_bench.cu: the same absorbed MLA decode
attention in PyTorch, as dense BF16 batched matmuls over a gathered contiguous
cache [batch, ctx, 576] (the gather is not timed; only the attention is):
    s = (q @ k^T) * scale ; p = softmax(s in F32) ; out = p @ k[..., :512]
Prints a table of median times (CUDA-graph replays, inputs rotated so the L2
does not serve them) with KV bandwidth as a fraction of the measured copy
bandwidth. Run on the GPU machine: python3 bench/attention/mla_decode_peer.py
"""
import math
import statistics

import torch

D, V = 576, 512


def copy_gbs():
    n = 2 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    b = torch.empty_like(a)
    times = []
    for i in range(8):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        if i:
            times.append(e0.elapsed_time(e1))
    del a, b
    return 2 * n / (statistics.median(times) * 1e-3) / 1e9


def attention(q, k, scale):
    s = torch.bmm(q, k.transpose(1, 2)).float() * scale  # [B, H, ctx]
    p = torch.softmax(s, dim=-1).to(torch.bfloat16)
    return torch.bmm(p, k[:, :, :V])  # [B, H, 512]


def time_case(batch, ctx, heads, copy):
    kv_bytes = batch * ctx * D * 2
    sets = max(1, min(8, math.ceil(512e6 / kv_bytes)))
    ks = [torch.randn(batch, ctx, D, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    qs = [torch.randn(batch, heads, D, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    scale = 1 / math.sqrt(192)
    for i in range(2):
        attention(qs[i % sets], ks[i % sets], scale)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    attention(qs[0], ks[0], scale)
    e1.record()
    e1.synchronize()
    iters = max(4, min(200, int(4.0 / max(e0.elapsed_time(e1), 1e-3))))
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(g):
            for i in range(iters):
                attention(qs[i % sets], ks[i % sets], scale)
    torch.cuda.synchronize()
    g.replay()
    times = []
    for _ in range(5):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / iters)
    us = statistics.median(times) * 1e3
    gbs = kv_bytes / (us * 1e-6) / 1e9
    tflops = batch * ctx * heads * 2 * (D + V) / (us * 1e-6) / 1e12
    del ks, qs, g
    torch.cuda.empty_cache()
    return us, gbs, gbs / copy, tflops


def main():
    torch.manual_seed(0)
    copy = copy_gbs()
    print(f"peer: torch {torch.__version__}, {torch.cuda.get_device_name()}, copy {copy:.0f} GB/s")
    rows = []
    for heads in (8, 64):
        for batch, ctx in ((1, 32768), (8, 8192), (32, 16384), (64, 8192), (128, 4096), (128, 32768)):
            rows.append((heads, batch, ctx) + time_case(batch, ctx, heads, copy))
    for heads in (16, 128):
        rows.append((heads, 64, 8192) + time_case(64, 8192, heads, copy))
    print("\n| heads | kv | batch | ctx | torch us | KV GB/s | of copy | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for h, b, c, us, gbs, frac, tf in rows:
        print(f"| {h} | bf16 | {b} | {c} | {us:.1f} | {gbs:.0f} | {100 * frac:.1f}% | {tf:.1f} |")


if __name__ == "__main__":
    main()
