#!/usr/bin/env python3
"""Pair slots the path-5 tile maps execute at 8192 Kimi tokens (E384, top-8,
distinct random experts per token as the bench draws them): executed MMA
columns over real pairs for each tiling (results-prefill-2026-12-01-s8.md, 4)."""
import math, random

E, T, K, DRAWS = 384, 8192, 8, 5

def tiles_128(c):  # 128-pair tiles, a partial tile of <= 64 pairs runs n = 64
    n = items = 0
    while c > 0:
        k = min(c, 128); n += 64 if k <= 64 else 128; c -= k; items += 1
    return n, items

def capped(c, cap, q):  # tiles of up to `cap` pairs, n rounded up to q
    n = items = 0
    while c > 0:
        k = min(c, cap); n += math.ceil(k / q) * q; c -= k; items += 1
    return n, items

def even_split(c):  # ceil(c / 128) items of equal size rounded up to 8
    items = math.ceil(c / 128)
    return math.ceil(c / items / 8) * 8 * items, items

tilings = {"128-pair tiles (n 64/128)": tiles_128,
           "256 cap, q64": lambda c: capped(c, 256, 64),
           "256 cap, q32": lambda c: capped(c, 256, 32),
           "256 cap, q16": lambda c: capped(c, 256, 16),
           "even split, q8": even_split}
random.seed(1)
sums = {k: [0, 0] for k in tilings}
real = 0
for _ in range(DRAWS):
    cnt = [0] * E
    for _t in range(T):
        for e in random.sample(range(E), K): cnt[e] += 1
    real += sum(cnt)
    print(f"pairs per expert: min {min(cnt)} max {max(cnt)} above 192: {sum(c > 192 for c in cnt)}")
    for c in cnt:
        for k, f in tilings.items():
            n, it = f(c); sums[k][0] += n; sums[k][1] += it
for k, (n, it) in sums.items():
    print(f"{k}: executed/real {n / real:.4f}, padded {(n - real) / n * 100:.1f}%, items per expert {it / (E * DRAWS):.3f}")
