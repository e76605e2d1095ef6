"""Tokenizer encode throughput: mxserve vs tiktoken (Kimi's tiktoken.model) and
vs HF tokenizers (a Llama-3-style byte-level BPE trained here on the corpus;
no real tokenizer.json is in shared/data), in one run on one machine.

All encoders get the same corpus line by line, plain text (no specials), one
thread. Throughput is reported per CPU-second (process CPU time), since the
machines this runs on are shared and wall time mostly measures neighbours;
wall-clock MB/s is printed too.

usage: python bench/tokenizer/compare.py MXSERVE_BINARY [--seconds S] [--out FILE]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(HERE))

from make_corpus import main as make_corpus  # noqa: E402
from tokenizer_helpers import KIMI_DIR, LLAMA3_PATTERN_FOR_BENCH, kimi_encoding  # noqa: E402


def python_bench(encode, lines, seconds):
    total = sum(len(line.encode()) for line in lines)
    passes, tokens = 0, 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        for line in lines:
            tokens += len(encode(line))
        passes += 1
        if time.perf_counter() - wall0 >= seconds:
            break
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"mb_per_cpu_s": total * passes / cpu / 1e6, "mb_per_s": total * passes / wall / 1e6,
            "passes": passes, "tokens_per_pass": tokens // passes}


def mxserve_bench(binary, model, corpus, seconds):
    out = subprocess.run([binary, "tokenize", "--model", str(model), "--bench", str(corpus),
                          "--bench-seconds", str(seconds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def train_llama3_style(lines, directory):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN_FOR_BENCH), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=16000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.save(str(directory / "tokenizer.json"))
    return tok


def git_commit():
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    import tiktoken
    import tokenizers

    work = Path(tempfile.mkdtemp(prefix="mx_tok_bench_"))
    corpus = work / "corpus.txt"
    make_corpus(corpus)
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    kimi_dir = work / "kimi"
    kimi_dir.mkdir()
    shutil.copy(KIMI_DIR / "tiktoken.model", kimi_dir / "tiktoken.model")
    shutil.copy(KIMI_DIR / "tokenizer_config.kimi-k2-instruct.json", kimi_dir / "tokenizer_config.json")
    hf_dir = work / "hf"
    hf_dir.mkdir()
    hf = train_llama3_style(lines, hf_dir)
    enc = kimi_encoding()

    rows = [
        ("Kimi tiktoken.model", "mxserve", mxserve_bench(args.binary, kimi_dir, corpus, args.seconds)),
        ("Kimi tiktoken.model", f"tiktoken {tiktoken.__version__}",
         python_bench(enc.encode_ordinary, lines, args.seconds)),
        ("Llama-3-style BPE (16k, trained here)", "mxserve", mxserve_bench(args.binary, hf_dir, corpus, args.seconds)),
        ("Llama-3-style BPE (16k, trained here)", f"tokenizers {tokenizers.__version__}",
         python_bench(lambda s: hf.encode(s, add_special_tokens=False).ids, lines, args.seconds)),
    ]
    header = (f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}\n"
              f"commit: {git_commit()}\n"
              f"machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs; "
              f"load average {os.getloadavg()[0]:.1f}), {platform.python_implementation()} {platform.python_version()}\n"
              f"corpus: {corpus.stat().st_size} bytes, {len(lines)} lines (GSM8K English + generated Chinese/Japanese + code), "
              f"encoded line by line, one thread\n")
    table = ["| tokenizer | encoder | MB per CPU-second | MB/s wall | tokens per pass |", "|---|---|---|---|---|"]
    for vocab, who, r in rows:
        table.append(f"| {vocab} | {who} | {r['mb_per_cpu_s']:.2f} | {r['mb_per_s']:.2f} | {r['tokens_per_pass']} |")
    text = header + "\n" + "\n".join(table) + "\n"
    # Same vocabulary, same corpus: the token counts must agree.
    same = rows[0][2]["tokens_per_pass"] == rows[1][2]["tokens_per_pass"] and \
        rows[2][2]["tokens_per_pass"] == rows[3][2]["tokens_per_pass"]
    text += f"\ntoken counts agree between mxserve and the reference: {same}\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
