"""HF tokenizer.json byte-level BPE through `mxserve tokenize`, compared with
the Python `tokenizers` package. No real tokenizer.json is in ../shared/data
(missing: Llama-3, Qwen2, SmolLM2, DeepSeek-V3 tokenizer.json), so each test
trains a small byte-level BPE with that family's pre-tokenizer on the corpus,
saves it, and compares ids, round trips and decodes of arbitrary ids."""
import json
import random
import unicodedata

import pytest

from tokenizer_helpers import SHARED, corpus, run_jsonl

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,  # noqa: E402
                        processors, trainers)

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DSV3 = [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


STYLES = {
    # name: (pre_tokenizer, ignore_merges, merges written as "a b" strings)
    "llama3": (lambda: pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), "isolated"), byte_level(False)]),
               True, False),
    "qwen2": (lambda: pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), "isolated"), byte_level(False)]),
              False, True),
    "smollm2": (lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)]),
                False, False),
    "deepseek_v3": (lambda: pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), "isolated") for p in DSV3] + [byte_level(False)]), False, True),
    "gpt2": (lambda: byte_level(True), False, False),
}
SPECIAL = ["<|begin_of_text|>", "<|eot_id|>", "<|im_end|>"]


def training_texts():
    return [t for t in corpus() if len(t) < 2000]


@pytest.fixture(scope="module", params=sorted(STYLES))
def trained(request, tmp_path_factory):
    name = request.param
    make_pre, ignore_merges, string_merges = STYLES[name]
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = make_pre()
    if name == "qwen2":
        tok.normalizer = normalizers.NFC()  # as Qwen2's tokenizer.json
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_texts(), trainer)
    tok.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, rstrip=True, normalized=False)])
    if name == "llama3":
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    d = tmp_path_factory.mktemp(name)
    tok.save(str(d / "tokenizer.json"))
    if string_merges:  # the older "a b" merges format
        data = json.loads((d / "tokenizer.json").read_text())
        data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
        (d / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
        tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}))
    return name, d, tok


def test_encode_matches_tokenizers(trained):
    name, d, tok = trained
    texts = corpus()
    requests = [{"op": "encode", "text": t, "allow_special": allow} for t in texts for allow in (True, False)]
    answers = run_jsonl(["--model", str(d)], requests)
    mismatches = []
    for req, ans in zip(requests, answers):
        tok.encode_special_tokens = not req["allow_special"]
        ref = tok.encode(req["text"], add_special_tokens=False).ids
        if ans.get("ids") != ref:
            mismatches.append((req["text"][:60], req["allow_special"], ref[:12], str(ans)[:200]))
    assert not mismatches, f"{name}: {len(mismatches)} of {len(requests)} differ, first: {mismatches[:3]}"
    decoded = run_jsonl(["--model", str(d)], [{"op": "decode", "ids": a["ids"]} for a in answers])
    for req, ans, dec in zip(requests, answers, decoded):
        # Round trip, as the reference does it: the text itself unless NFC (Qwen2-style) or a
        # stripping added token (<mask> lstrip/rstrip) changed it.
        assert dec["text"] == tok.decode(ans["ids"], skip_special_tokens=False), (name, req["text"][:60])
        if name != "qwen2" and "<mask>" not in req["text"]:
            assert dec["text"] == req["text"], (name, req["text"][:60])
        elif name == "qwen2" and "<mask>" not in req["text"]:
            assert dec["text"] == unicodedata.normalize("NFC", req["text"]), (name, req["text"][:60])
    real = sorted(str(p) for p in (SHARED / "data").rglob("tokenizer.json"))
    print(f"{name}: {len(texts)} strings x allow_special on/off identical to tokenizers on a generated "
          f"vocabulary; real tokenizer.json in shared/data: {real or 'none (Llama-3, Qwen2, SmolLM2, DeepSeek-V3 missing)'}")


def test_decode_and_stream_match_tokenizers(trained):
    name, d, tok = trained
    rng = random.Random(5)
    n_vocab = tok.get_vocab_size()
    sequences = [[rng.randrange(n_vocab) for _ in range(rng.randint(1, 10))] for _ in range(1000)]
    requests = [{"op": "decode", "ids": s} for s in sequences] + [{"op": "stream", "ids": s} for s in sequences]
    answers = run_jsonl(["--model", str(d)], requests)
    n = len(sequences)
    for ids, dec, stream in zip(sequences, answers[:n], answers[n:]):
        ref = tok.decode(ids, skip_special_tokens=False)
        assert dec["text"] == ref, (name, ids)
        assert "".join(stream["deltas"]) == ref, (name, ids)


def test_bos_from_post_processor_or_config(trained):
    name, d, tok = trained
    (info,) = run_jsonl(["--model", str(d)], [{"op": "info"}])
    assert info["bos_id"] == tok.token_to_id("<|begin_of_text|>")
    assert info["eos_ids"] == [tok.token_to_id("<|eot_id|>")]
    assert info["add_bos"] is (name == "llama3")


# ---- the same vocabularies as GGUF metadata (tokenizer.ggml.*) ----

GGUF_PRE = {"llama3": "llama-bpe", "qwen2": "qwen2", "smollm2": "smollm", "deepseek_v3": "deepseek-v3", "gpt2": "gpt2"}


def write_gguf_vocab(path, tok, pre):
    """A GGUF v3 file with only tokenizer metadata, as llama.cpp's converter lays it out."""
    import struct
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    added = {a["id"]: a for a in data["added_tokens"]}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens, types = [""] * n, [1] * n
    for t, i in vocab.items():
        tokens[i] = t
    for i, a in added.items():
        tokens[i], types[i] = a["content"], 3 if a["special"] else 4

    def gstr(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    kvs = [("tokenizer.ggml.model", 8, gstr("gpt2")), ("tokenizer.ggml.pre", 8, gstr(pre)),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"".join(gstr(t) for t in tokens)),
           ("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, len(merges)) + b"".join(gstr(m) for m in merges)),
           ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, n) + b"".join(struct.pack("<i", t) for t in types)),
           ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", tok.token_to_id("<|begin_of_text|>"))),
           ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", tok.token_to_id("<|eot_id|>")))]
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, typ, value in kvs:
        out += gstr(key) + struct.pack("<I", typ) + value
    path.write_bytes(out)


def test_gguf_vocab_matches_tokenizers(trained, tmp_path):
    name, _, tok = trained
    gguf = tmp_path / f"{name}.gguf"
    write_gguf_vocab(gguf, tok, GGUF_PRE[name])
    # GGUF token types cannot say lstrip/rstrip: leave out the texts with <mask> (lstrip+rstrip).
    texts = [t for t in corpus(n_random=800, n_gsm=200) if "<mask>" not in t]
    requests = [{"op": "encode", "text": t, "allow_special": True} for t in texts]
    answers = run_jsonl(["--model", str(gguf)], requests)
    # GGUF metadata has no normalizer (llama.cpp applies none): compare without it.
    ref = Tokenizer.from_str(tok.to_str())
    ref.normalizer = None
    ref.encode_special_tokens = False
    for req, ans in zip(requests, answers):
        assert ans.get("ids") == ref.encode(req["text"], add_special_tokens=False).ids, (name, req["text"][:60])
    (info,) = run_jsonl(["--model", str(gguf)], [{"op": "info"}])
    assert info["eos_ids"] == [tok.token_to_id("<|eot_id|>")]
