"""Shared pieces of the tokenizer integration tests: the reference encoders
(tiktoken for Kimi, HF tokenizers, jinja2 configured as transformers does),
a deterministic varied corpus, and a driver for `mxserve tokenize --jsonl`."""
import json
import os
import random
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MX_SHARED_DIR", REPO.parent / "shared"))
KIMI_DIR = SHARED / "data" / "tokenizers" / "kimi"
GSM8K = SHARED / "data" / "gsm8k" / "test.jsonl"

# Kimi's pre-tokenizer, verbatim from tokenization_kimi.py (Python `regex` /
# Rust syntax with && class intersections); tiktoken compiles it as is.
KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# Llama-3's Split regex (HF tokenizer.json), used by the benchmark's trained BPE.
LLAMA3_PATTERN_FOR_BENCH = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def mxserve_binary():
    """MXSERVE_BINARY, or the same name under src/ of that build dir (CMake puts the
    executable in build/src/), or a local build."""
    path = os.environ.get("MXSERVE_BINARY")
    if path:
        given = Path(path)
        if not given.exists() and (given.parent / "src" / given.name).exists():
            return str(given.parent / "src" / given.name)
        return str(given)
    for cand in ("build/src/mxserve", "build/mxserve", "build-tok/src/mxserve"):
        if (REPO / cand).exists():
            return str(REPO / cand)
    raise RuntimeError("set MXSERVE_BINARY to the built mxserve")


def run_jsonl(args, requests, timeout=300):
    """Sends all requests through one `mxserve tokenize --jsonl` process."""
    payload = "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in requests)
    proc = subprocess.run([mxserve_binary(), "tokenize", "--jsonl", *args], input=payload.encode(),
                          capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    # Split on "\n" only: answers may hold U+2028 or U+0085, which splitlines() would cut at.
    lines = proc.stdout.decode("utf-8").split("\n")[:-1]
    assert len(lines) == len(requests), proc.stderr.decode(errors="replace")
    return [json.loads(line) for line in lines]


# ---- Kimi reference (tiktoken + tokenization_kimi.py's encode wrapper) ----

def kimi_encoding():
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(str(KIMI_DIR / "tiktoken.model"))
    config = json.loads((KIMI_DIR / "tokenizer_config.kimi-k2-instruct.json").read_text())
    named = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
    n = len(ranks)
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(n, n + 256)}
    return tiktoken.Encoding(name="kimi", pat_str=KIMI_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def _split_long_runs(s, max_run):
    # Same rule as the Kimi wrapper: cut runs of > max_run all-space / all-non-space chars.
    if not s:
        yield s
        return
    run, run_is_space, start = 0, s[0].isspace(), 0
    for i, ch in enumerate(s):
        space = ch.isspace()
        if space != run_is_space:
            run, run_is_space = 1, space
        else:
            run += 1
            if run > max_run:
                yield s[start:i]
                start, run = i, 1
    yield s[start:]


def kimi_encode(enc, text, allow_special):
    ids = []
    for i in range(0, len(text), 400_000):
        for piece in _split_long_runs(text[i:i + 400_000], 25_000):
            if allow_special:
                ids += enc.encode(piece, allowed_special="all", disallowed_special=())
            else:
                ids += enc.encode(piece, allowed_special=set(), disallowed_special=())
    return ids


# ---- jinja2 as transformers renders chat templates ----

def hf_jinja_env():
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def hf_render(env, source, messages, tools, add_generation_prompt, extra=None, bos="", eos=""):
    """Returns ("ok", text) or ("error", message)."""
    try:
        t = env.from_string(source)
        return "ok", t.render(messages=messages, tools=tools, documents=None,
                              add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos,
                              **(extra or {}))
    except Exception as e:  # the template's own error (raise_exception, sandbox, undefined)
        return "error", f"{type(e).__name__}: {e}"


# ---- corpus ----

WORDS_ZH = "我们今天天气很好人工智能模型训练数据中文分词测试北京上海学习研究发展经济社会文化历史自主性，。！？、：；“”《》（）"
WORDS_JA = "こんにちは世界カタカナひらがな東京日本語のテキストですトークナイザーテストー々〆ヶ、。「」・〜"
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "❤️", "🤖", "✨", "🔥", "🎉", "🧪"]
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "const x = await fetch(`/api/${id}`);\r\n",
    "SELECT id, name FROM users WHERE age >= 21;",
    "#include <vector>\nint main() { return 0; }\n",
    "    if x:\n        pass\n\n\n",
    "{\"key\": [1, 2.5, null, true], \"k2\": \"v\"}",
    "x = y if z else w  # comment\n",
]
SPECIALS = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "[BOS]", "[EOS]",
            "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|reserved_token_163700|>", "<think>",
            "<|begin_of_text|>", "<|eot_id|>", "<tool>", "<|im_end", "<|", "|>", "  <mask>  x", "a<mask>\n"]
UNICODE_MISC = ["café", "naïve", "Ǆemal", "ﬁnance", "ΑΒΓ αβγ", "Привет мир", "مرحبا", "שלום", "नमस्ते", "한국어 텍스트",
                "e\u0301", "\u00a0nbsp", "\u2003em space", "\u3000全角", "I'M", "it's", "WE'VE", "you'll", "ſ", "K",
                "ǅ", "Ⅻ", "①②③", "٣٤٥", "¹²³", "x²", "\u200bzero width", "\ufeffbom", "\t\ttabs", "a\u2028b"]


def gsm8k_lines(limit):
    lines = []
    with open(GSM8K) as f:
        for line in f:
            row = json.loads(line)
            lines.append(row["question"])
            lines.append(row["answer"])
            if len(lines) >= limit:
                break
    return lines


def random_text(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        kind = rng.randrange(10)
        if kind == 0:
            parts.append("".join(rng.choice(WORDS_ZH) for _ in range(rng.randint(1, 20))) + rng.choice(["", "\n", "。\n"]))
        elif kind == 1:
            parts.append("".join(rng.choice(WORDS_JA) for _ in range(rng.randint(1, 15))))
        elif kind == 2:
            parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))))
        elif kind == 3:
            parts.append(rng.choice(CODE))
        elif kind == 4:
            parts.append(rng.choice([" ", "\n", "\t", "\r\n", "  \n ", "\u3000"]) * rng.randint(1, 40))
        elif kind == 5:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 15))) + rng.choice(["", ".5", ",000", "%"]))
        elif kind == 6:
            parts.append(rng.choice(SPECIALS))
        elif kind == 7:
            parts.append(rng.choice(UNICODE_MISC))
        else:
            parts.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ'!?.,;:-_()[]{}<>|/\\\"") for _ in range(rng.randint(1, 30))))
        parts.append(rng.choice(["", " ", "\n", ""]))
    return "".join(parts)


def corpus(n_random=2500, n_gsm=600, seed=1234):
    rng = random.Random(seed)
    texts = gsm8k_lines(n_gsm)
    texts += [random_text(rng) for _ in range(n_random)]
    texts += UNICODE_MISC + CODE + SPECIALS + EMOJI
    texts += ["", " ", "  ", "\n", "\n\n", " \n", "a", "  hello", "hello  ", "1234567", "x" * 200]
    # Long runs: over the 25k limit of Kimi's wrapper, and long repeated pieces.
    texts += [" " * 30000, "a" * 26000, "ab " * 9000, "\n" * 500, "中" * 3000, "1" * 999]
    return texts
