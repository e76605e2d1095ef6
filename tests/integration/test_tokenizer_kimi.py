"""Kimi's real tiktoken.model through `mxserve tokenize`, compared with Python
tiktoken (Kimi's pattern, its 256 specials and its encode wrapper's chunking)
on a few thousand varied strings: identical ids, identical round trip,
identical decode of arbitrary id sequences (invalid UTF-8 included), and
streamed deltas that add up to the decode."""
import random
import shutil

import pytest

from tokenizer_helpers import KIMI_DIR, corpus, kimi_encode, kimi_encoding, run_jsonl

pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def kimi_model_dir(tmp_path_factory):
    if not (KIMI_DIR / "tiktoken.model").exists():
        pytest.skip(f"missing real file {KIMI_DIR / 'tiktoken.model'}")
    d = tmp_path_factory.mktemp("kimi")
    shutil.copy(KIMI_DIR / "tiktoken.model", d / "tiktoken.model")
    shutil.copy(KIMI_DIR / "tokenizer_config.kimi-k2-instruct.json", d / "tokenizer_config.json")
    return d


@pytest.fixture(scope="module")
def enc():
    return kimi_encoding()


def extra_texts():
    # Han script-extension punctuation and kana marks sit at the edge of \p{Han}.
    # ("。\n" is one token: PCRE2's Script_Extensions \p{Han} would split it.)
    texts = ["、。「」〜・ー々〆〇", "日本語、テスト。", "中文，标点！？", "ＡＢＣ１２３", "Ǆǅǆ ǈ", "ΣΑΣ σας"]
    return texts + [t + "\n" for t in texts] + ["文章です。\n", "一、\n二、\n", "〆切\n"]


def test_encode_matches_tiktoken(kimi_model_dir, enc):
    texts = corpus() + extra_texts()
    assert len(texts) >= 3000
    requests = [{"op": "encode", "text": t, "allow_special": allow} for t in texts for allow in (True, False)]
    answers = run_jsonl(["--model", str(kimi_model_dir)], requests)
    mismatches = []
    for req, ans in zip(requests, answers):
        ref = kimi_encode(enc, req["text"], req["allow_special"])
        if ans.get("ids") != ref:
            mismatches.append((req["text"][:60], req["allow_special"], ref[:12], ans))
    assert not mismatches, f"{len(mismatches)} of {len(requests)} differ, first: {mismatches[:3]}"
    # Round trip: decode(encode(text)) == text, and specials stay out of plain text.
    requests = [{"op": "decode", "ids": a["ids"]} for a in answers]
    decoded = run_jsonl(["--model", str(kimi_model_dir)], requests)
    for text_req, d in zip([r for r in [{"text": t} for t in texts for _ in (0, 1)]], decoded):
        assert d["text"] == text_req["text"]
    for req, ans in zip(
            [{"op": "encode", "text": t, "allow_special": allow} for t in texts for allow in (True, False)], answers):
        if not req["allow_special"]:
            assert all(i < 163584 for i in ans["ids"]), req["text"][:60]
    print(f"kimi: {len(texts)} strings x allow_special on/off identical to tiktoken")


def test_decode_and_stream_match_python_on_random_ids(kimi_model_dir, enc):
    rng = random.Random(99)
    sequences = []
    for _ in range(1500):
        n = rng.randint(1, 12)
        ids = []
        for _ in range(n):
            r = rng.random()
            if r < 0.45:
                ids.append(rng.randrange(0, 256))        # single bytes: broken UTF-8 is common
            elif r < 0.9:
                ids.append(rng.randrange(256, 163584))
            else:
                ids.append(rng.randrange(163584, 163840))  # specials
        sequences.append(ids)
    requests = [{"op": "decode", "ids": s} for s in sequences] + [{"op": "stream", "ids": s} for s in sequences]
    answers = run_jsonl(["--model", str(kimi_model_dir)], requests)
    n = len(sequences)
    replaced = 0
    for ids, dec, stream in zip(sequences, answers[:n], answers[n:]):
        ref = enc.decode(ids)  # bytes.decode("utf-8", errors="replace")
        assert dec["text"] == ref, ids
        assert "".join(stream["deltas"]) == ref, ids
        replaced += "\ufffd" in ref
    assert replaced > 100  # the sample did exercise invalid UTF-8


def test_info_reports_bos_and_both_eos(kimi_model_dir):
    (info,) = run_jsonl(["--model", str(kimi_model_dir)], [{"op": "info"}])
    assert info["vocab_size"] == 163840
    assert info["bos_id"] == 163584
    assert 163585 in info["eos_ids"] and 163586 in info["eos_ids"]
    assert info["add_bos"] is False
