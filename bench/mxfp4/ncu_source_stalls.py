#!/usr/bin/env python3
"""Per-instruction warp-stall samples from `ncu --page source --csv --print-source sass`.

Prints the total samples per stall reason, then the instructions with the most
samples (address, share, executions, SASS, the three largest reasons):
  bench/mxfp4/ncu_source_stalls.py SASS.csv [TOP]
"""
import csv
import sys


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prefixes its own messages with ==
    # The first line names the kernel; the header is the line that starts with "Address".
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), 0)
    rows = list(csv.DictReader(lines[start:]))
    if not rows:
        sys.exit(f"{path}: no CSV rows")
    cols = list(rows[0].keys())
    reasons = [c for c in cols if c and c.startswith("stall_") and "Not Issued" not in c]
    total_col = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
    exec_col = next((c for c in cols if c.startswith("Instructions Executed")), None)
    src_col = next((c for c in cols if c in ("Source", "# Source")), cols[1])
    addr_col = next((c for c in cols if c.startswith("Address")), cols[0])
    if not total_col:
        sys.exit(f"{path}: no stall sampling column among {cols}")
    grand = sum(number(r[total_col]) for r in rows)
    sums = sorted(((sum(number(r[c]) for r in rows), c) for c in reasons), reverse=True)
    print(f"total samples {grand:.0f}")
    print(", ".join(f"{c} {s:.0f} ({100 * s / max(grand, 1):.1f}%)" for s, c in sums if s))
    for r in sorted(rows, key=lambda r: -number(r[total_col]))[:top]:
        n = number(r[total_col])
        parts = sorted(((number(r[c]), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c.replace('stall_', '')} {v:.0f}" for v, c in parts if v)
        ex = number(r[exec_col]) if exec_col else 0
        print(f"{r[addr_col]:>8} {n:6.0f} {100 * n / max(grand, 1):5.1f}% exec={ex:9.0f} {r[src_col][:70]:<70} {why}")


if __name__ == "__main__":
    main()
