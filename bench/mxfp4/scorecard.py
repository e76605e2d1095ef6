#!/usr/bin/env python3
"""Issue #8's targets as one short table: reads the JSON lines of any number of
mxfp4_bench runs (--decode, --dense, --moe-prefill) and peers runs, picks the
rows the targets are about (the automatic kernel choice; CUDA-graph timings for
the MoE decode and the dense GEMMs, since the engine replays decode steps as
graphs; the dense events timing is printed beside the graph's) and prints
each target with what was measured, its bound and MET / MISSED, then a count.
A target with no row to judge (a bench part or the peers that failed or were
left out) is listed as NOT MEASURED and counts as not met. It judges speed only; bench/mxfp4/report.py judges correctness (error bounds,
unwritten outputs) and is the one that fails a run.
  bench/mxfp4/scorecard.py FILE.jsonl [FILE.jsonl ...]"""
import json
import re
import sys

DECODE_TOKENS = (1, 2, 8, 40)
DECODE_RATIO = 1.4          # x the MXFP4 byte floor
DECODE_VS_TORCH = 4.0       # x faster than torch BF16 grouped GEMM
DENSE_SHAPES = ("dense_gate_up 36864x7168", "dense_down 7168x18432")
DENSE_RATIO = 1.3
DENSE_M = (1, 8, 12, 16, 32, 64)  # always judged; any other M <= 64 measured is judged too
PREFILL_TOKENS = 8192
PREFILL_TFLOPS = 550.0
W4A16_REL_ERR = 1e-2        # "at the level of a BF16 MMA"


def read_rows(paths):
    ours, peers = [], []
    for path in paths:
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            (ours if "kernel" in r else peers).append(r)
    return ours, peers


def is_auto(r):
    return r.get("note", "").split(",")[0].strip() == "auto"


def pick(rows, prefer_graph):
    """The row to judge among repeats of the same kernel: the graph timings
    when asked for and present, averaged over the repeats (the fastest would
    flatter the kernel by the run-to-run spread)."""
    if prefer_graph:
        graph = [r for r in rows if "CUDA graph" in r.get("note", "")]
        rows = graph or rows
    if not rows:
        return None
    judged = dict(rows[0])
    judged["us"] = sum(r["us"] for r in rows) / len(rows)
    judged["floor_us"] = sum(r["floor_us"] for r in rows) / len(rows)
    clocks = [r["sm_mhz"] for r in rows if r.get("sm_mhz")]
    judged["sm_mhz"] = sum(clocks) / len(clocks) if clocks else None
    rates = [tflops(r) for r in rows]
    # TFLOP/s of the averaged time: the same work over the mean of the times.
    judged["tflops"] = None if None in rates else len(rows) / sum(1 / t for t in rates)
    return judged


def at_clock(r):
    """The SM clock the row ran at (mxfp4_bench samples it: the board's power
    cap moves it by up to 20%), as text to append; empty when not sampled."""
    return f" at {r['sm_mhz']:.0f} MHz" if r.get("sm_mhz") else ""


def tflops(r):
    m = re.search(r"([\d.]+) TFLOP/s", r.get("note", ""))
    return float(m.group(1)) if m else None


NOT_MEASURED = None  # the `met` of a target without a row to judge
FP8_DENSE = "FP8 ring (quantize+gemm) auto warps"  # mxfp4_bench --dense-fp8's automatic FP8 rows
CALLER_QUANTIZED = "x quantized by the caller"  # moe_variants.cc's label for W4A4 as CudaOps calls it


def scorecard(ours, peers):
    lines = []  # (target, case, measured, bound, met: True / False / NOT_MEASURED)
    torch_moe = {p["T"]: p for p in peers if p.get("what") == "moe"}
    for mode in ("W4A16", "W4A4"):
        for t in DECODE_TOKENS:
            autos = [x for x in ours if x["kernel"] == "fused_moe" and x["M"] == t and x["mode"] == mode
                     and is_auto(x)]
            # W4A4 as the engine runs it: x quantized by the caller (CudaOps,
            # in its F32 -> BF16 conversion), when the bench has that row.
            by_caller = [x for x in autos if mode == "W4A4" and CALLER_QUANTIZED in x.get("note", "")]
            r = pick(by_caller or autos, prefer_graph=True)
            case = f"{t} token{'s' if t > 1 else ''}" + (", x quantized by the caller" if by_caller else "")
            if not r:
                lines.append((f"MoE decode {mode}", case, "no auto row", f"<= {DECODE_RATIO}x", NOT_MEASURED))
            else:
                ratio = r["us"] / r["floor_us"]
                timing = "graph" if "CUDA graph" in r["note"] else "events"
                lines.append((f"MoE decode {mode}", f"{case} ({timing})",
                              f"{r['us']:.1f} us = {ratio:.2f}x floor{at_clock(r)}",
                              f"<= {DECODE_RATIO}x", ratio <= DECODE_RATIO))
            if mode != "W4A16":
                continue
            p = torch_moe.get(t)
            target = (f"MoE decode {mode} vs torch BF16", f"{t} tokens")
            if not (p and r):
                missing = "no torch peer row" if not p else "no auto row"
                lines.append((*target, missing, f">= {DECODE_VS_TORCH}x", NOT_MEASURED))
                continue
            speedup = p["torch_bf16_grouped_us"] / r["us"]
            lines.append((*target, f"{speedup:.2f}x faster ({p['torch_bf16_grouped_us']:.0f} us)",
                          f">= {DECODE_VS_TORCH}x", speedup >= DECODE_VS_TORCH))
    for shape in DENSE_SHAPES:
        measured = {x["M"] for x in ours if x["kernel"] == "gemm" and x["shape"] == shape and x["M"] <= 64}
        for m in sorted(measured | set(DENSE_M)):
            autos = [x for x in ours if x["kernel"] == "gemm" and x["shape"] == shape and x["M"] == m
                     and is_auto(x)]
            r = pick(autos, prefer_graph=True)
            if not r:
                lines.append(("dense W4A16", f"{shape.split()[1]} M={m}", "no auto row", f"<= {DENSE_RATIO}x",
                              NOT_MEASURED))
                continue
            ratio = r["us"] / r["floor_us"]
            timing = "graph" if "CUDA graph" in r["note"] else "events"
            # The events timing beside it (each launch bracketed by events: the
            # gap between launches included).
            ev = pick([x for x in autos if "CUDA graph" not in x.get("note", "")], prefer_graph=False)
            beside = f"; events {ev['us']:.1f} us = {ev['us'] / ev['floor_us']:.2f}x" if ev and timing == "graph" else ""
            lines.append(("dense W4A16", f"{shape.split()[1]} M={m} ({timing})",
                          f"{r['us']:.1f} us = {ratio:.2f}x floor{at_clock(r)}{beside}", f"<= {DENSE_RATIO}x",
                          ratio <= DENSE_RATIO))
    # The dense target for W4A4 on FP8 tensor cores (mxfp4_bench --dense-fp8;
    # the engine with --w4a4-mma fp8), listed only where such rows exist.
    for shape in DENSE_SHAPES:
        fp8 = [x for x in ours if x["kernel"] == "gemm" and x["shape"] == shape and x["mode"] == "W4A4"
               and x.get("note", "").startswith(FP8_DENSE)]
        for m in sorted({x["M"] for x in fp8}):
            r = pick([x for x in fp8 if x["M"] == m], prefer_graph=True)
            ratio = r["us"] / r["floor_us"]
            timing = "graph" if "CUDA graph" in r["note"] else "events"
            lines.append(("dense W4A4 on FP8", f"{shape.split()[1]} M={m} ({timing})",
                          f"{r['us']:.1f} us = {ratio:.2f}x floor{at_clock(r)}", f"<= {DENSE_RATIO}x",
                          ratio <= DENSE_RATIO))
    for mode in ("W4A16", "W4A4"):
        r = pick([x for x in ours if x["kernel"] == "fused_moe" and x["M"] == PREFILL_TOKENS and x["mode"] == mode
                  and is_auto(x)], prefer_graph=False)
        if not r or r["tflops"] is None:
            lines.append((f"MoE prefill {mode}", f"{PREFILL_TOKENS} tokens", "no auto row with TFLOP/s",
                          f">= {PREFILL_TFLOPS:.0f} TFLOP/s", NOT_MEASURED))
            continue
        p = torch_moe.get(PREFILL_TOKENS)
        peer = f"; torch BF16 {p['torch_tflops']:.0f}" if p and "torch_tflops" in p else ""
        lines.append((f"MoE prefill {mode}", f"{PREFILL_TOKENS} tokens", f"{r['tflops']:.0f} TFLOP/s ({r['us'] / 1e3:.2f} ms){peer}",
                      f">= {PREFILL_TFLOPS:.0f} TFLOP/s", r["tflops"] >= PREFILL_TFLOPS))
    gemm_err = [x["rel_err"] for x in ours if x["kernel"] == "gemm" and x["mode"] == "W4A16" and x["rel_err"] >= 0]
    if gemm_err:
        lines.append(("W4A16 accuracy", f"{len(gemm_err)} GEMM rows", f"max rel err {max(gemm_err):.2e}",
                      f"<= {W4A16_REL_ERR:.0e}", max(gemm_err) <= W4A16_REL_ERR))
    else:
        lines.append(("W4A16 accuracy", "GEMM rows", "no checked GEMM row", f"<= {W4A16_REL_ERR:.0e}", NOT_MEASURED))
    quant = [x for x in ours if x["kernel"] in ("w4a4_quantizer", "dense_fp8_quantizer")]
    if quant:
        bad = sum(max(x["unwritten"], 0) for x in quant)
        lines.append(("W4A4 quantizer", f"{len(quant)} checks", f"{bad} mismatching", "bit-exact", bad == 0))
    else:
        lines.append(("W4A4 quantizer", "checks", "no check row (--checks)", "bit-exact", NOT_MEASURED))
    return lines


def verdict(met):
    return "NOT MEASURED" if met is NOT_MEASURED else "MET" if met else "MISSED"


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lines = scorecard(*read_rows(argv[1:]))
    print("| target | case | measured | bound | |")
    print("|---|---|---|---|---|")
    for target, case, measured, bound, met in lines:
        print(f"| {target} | {case} | {measured} | {bound} | {verdict(met)} |")
    unmeasured = sum(l[4] is NOT_MEASURED for l in lines)
    tail = f" ({unmeasured} not measured)" if unmeasured else ""
    print(f"\nissue #8 targets: {sum(l[4] is True for l in lines)} of {len(lines)} met{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
