#!/usr/bin/env python3
"""How unevenly path 5's persistent CTAs finish, by a cost model (no GPU).

Routes T tokens top-8 over 384 experts uniformly at random (Kimi-K2.5 shape), cuts
each expert's pairs into the items of the wide gate_up (tiles of up to 224 pairs, 32
row blocks, 2-CTA clusters taking the same tiles) and of down (tiles of 128 pairs, 28
row blocks), gives each item a cost of (its B columns + 40), the columns after
rounding as the kernels do (gate_up: 128 + a box of 32/48/64/96; down: 128 or a box
of 48/64/128), and reports the busiest worker's sum over the mean for the kernels'
static order (item += workers) and for items handed out at run time (each to the
worker that is free first). The +40 stands for the per-item cost that does not
scale with the columns (dequantization, epilogue); it is a guess, not a measurement.
Usage: item_balance_model.py [TOKENS] [ROUTINGS]   (needs numpy)
"""
import heapq
import sys

import numpy as np


def box(rest, sizes):
    return next(b for b in sizes if rest <= b)


def costs(counts):
    gate_up, down = [], []
    for c in counts:
        for left in range(c, 0, -224):
            gate_up.append(128 + box(min(left, 224) - 128, (32, 48, 64, 96)) + 40)
        for left in range(c, 0, -128):
            down.append(box(min(left, 128), (48, 64, 128)) + 40)
    return gate_up, down


def static_and_dynamic(tile_costs, row_blocks, workers):
    items = [c for c in tile_costs for _ in range(row_blocks)]
    sums = np.zeros(workers)
    for i, c in enumerate(items):
        sums[i % workers] += c
    free = [0.0] * workers
    for c in items:
        heapq.heappush(free, heapq.heappop(free) + c)
    mean = sum(items) / workers
    return sums.max() / mean, max(free) / mean


def main():
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    routings = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rng = np.random.default_rng(1)
    for r in range(routings):
        counts = np.zeros(384, int)
        for _ in range(tokens):
            counts[rng.choice(384, 8, replace=False)] += 1
        gate_up, down = costs(counts)
        # gate_up: a 2-CTA cluster takes both row blocks of a pair: 16 pairs, 66 clusters.
        for name, tiles, rbs, workers in (("gate_up", gate_up, 16, 66), ("down", down, 28, 132)):
            s, d = static_and_dynamic(tiles, rbs, workers)
            print(f"routing {r} {name}: busiest / mean {s:.4f} static, {d:.4f} handed out at run time")


if __name__ == "__main__":
    main()
