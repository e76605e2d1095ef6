"""Peer figures for bench/attention: torch.nn.functional.scaled_dot_product_attention
on the same shapes as attention_bench (BF16 inputs, dense KV: no paging), timed with
CUDA events (median of 7 x 10 calls after warm-up), plus the device-to-device copy
bandwidth measured the same way. Prints a markdown table last.
    python3 bench/attention/torch_sdpa.py
"""
import statistics

import torch
import torch.nn.functional as F


def median_us(fn, inner=10, outer=7):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(outer):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(1e3 * a.elapsed_time(b) / inner)
    return statistics.median(times)


def causal_pairs(n):
    return n * (n + 1) / 2


def main():
    dev = "cuda"
    rows = []
    src = torch.empty(2 << 30, dtype=torch.uint8, device=dev).fill_(1)
    dst = torch.empty_like(src)
    us = median_us(lambda: dst.copy_(src), 5, 7)
    copy_gbs = 2 * src.numel() / (us * 1e3)
    rows.append(("copy", "2 GiB device-to-device", us, copy_gbs, "GB/s (read + write)", ""))
    del src, dst

    n = 8192
    q = torch.randn(1, 32, n, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 8, n, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, 8, n, 128, device=dev, dtype=torch.bfloat16)
    us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), 3, 5)
    rows.append(("prefill GQA (sdpa)", "8192 tok, 32q/8kv x128, bf16", us, 4 * 32 * 128 * causal_pairs(n) / (us * 1e6),
                 "TFLOP/s", ""))
    k32 = torch.randn(1, 32, n, 128, device=dev, dtype=torch.bfloat16)
    v32 = torch.randn(1, 32, n, 128, device=dev, dtype=torch.bfloat16)
    us = median_us(lambda: F.scaled_dot_product_attention(q, k32, v32, is_causal=True), 3, 5)
    rows.append(("prefill dense (sdpa)", "8192 tok, 32 heads x128, bf16", us,
                 4 * 32 * 128 * causal_pairs(n) / (us * 1e6), "TFLOP/s", ""))
    del q, k, v, k32, v32
    try:
        q = torch.randn(1, 64, n, 192, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, 64, n, 192, device=dev, dtype=torch.bfloat16)
        v = torch.randn(1, 64, n, 128, device=dev, dtype=torch.bfloat16)
        us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 3, 5)
        rows.append(("prefill MLA expanded (sdpa)", "8192 tok, 64 heads, qk192 v128, bf16", us,
                     2 * 64 * 320 * causal_pairs(n) / (us * 1e6), "TFLOP/s", ""))
        del q, k, v
    except RuntimeError as e:  # no SDPA backend for qk != v dims
        rows.append(("prefill MLA expanded (sdpa)", "unsupported: " + str(e).splitlines()[0][:60], 0, 0, "", ""))

    for batch, ctx in [(1, 32768), (16, 8192), (64, 4096), (64, 8192)]:
        q = torch.randn(batch, 32, 1, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(batch, 8, ctx, 128, device=dev, dtype=torch.bfloat16)
        v = torch.randn(batch, 8, ctx, 128, device=dev, dtype=torch.bfloat16)
        us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        gbs = batch * ctx * 2 * 8 * 128 * 2 / (us * 1e3)
        rows.append(("decode GQA (sdpa)", f"b{batch} ctx{ctx} bf16 32q/8kv x128", us, gbs, "GB/s of KV",
                     f"{100 * gbs / copy_gbs:.0f}%"))
        del q, k, v

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; median of 7 x 10 calls")
    print("| case | shape | time us | rate | unit | of copy bw |\n|---|---|---|---|---|---|")
    for name, shape, us, rate, unit, frac in rows:
        print(f"| {name} | {shape} | {us:.1f} | {rate:.1f} | {unit} | {frac} |")


if __name__ == "__main__":
    main()
