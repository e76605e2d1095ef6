"""`mxserve serve -tp 2` (tensor parallel, and with --enable-expert-parallel)
on the CPU backend, ranks as threads over the in-process communicator,
answers the same greedy completions as the unsharded server, on a synthetic
Kimi-K2.5 MXFP4 checkpoint (MLA + MoE) and on --load-format dummy weights
made from its config.json alone (docs/parallel.md)."""
import json
import shutil
import subprocess
import urllib.request

import pytest

from conftest import mxserve_binary_path, serve_process, synth_kimi
from tokenizer_helpers import KIMI_DIR

pytestmark = pytest.mark.skipif(not (KIMI_DIR / "tiktoken.model").exists(), reason="shared Kimi tokenizer data missing")

# Token ids: the synthetic model has a 1024-token vocabulary.
PROMPTS = [[5, 17, 300, 2], [1000, 3, 3, 3, 3, 3], [42], [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, mxserve_binary):
    return synth_kimi(tmp_path_factory.mktemp("kimi-synth-tp"))


@pytest.fixture(scope="module")
def config_only_dir(tmp_path_factory, model_dir):
    """The same model without weight files: only --load-format dummy serves it."""
    d = tmp_path_factory.mktemp("kimi-config-only")
    for name in ("config.json", "tiktoken.model", "tokenizer_config.json"):
        shutil.copy(model_dir / name, d / name)
    return d


def completions(base, prompts):
    out = []
    for p in prompts:
        body = {"model": "m", "prompt": p, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            choice = json.loads(r.read())["choices"][0]
        out.append((choice["text"], choice["finish_reason"]))
    return out


def serve_and_complete(model, extra):
    args = ["--model", str(model), "--served-model-name", "m", "--max-model-len", "128", "--num-kv-blocks", "64",
            "--threads", "2", *extra]
    with serve_process(args) as (base, _):
        with urllib.request.urlopen(base + "/v1/models", timeout=30) as r:
            assert json.loads(r.read())["data"][0]["id"] == "m"
        return completions(base, PROMPTS)


@pytest.fixture(scope="module")
def reference(model_dir):
    return serve_and_complete(model_dir, [])


@pytest.mark.parametrize("extra", [["-tp", "2"], ["--tensor-parallel-size", "2", "--enable-expert-parallel"]],
                         ids=["tp2", "tp2-ep"])
def test_sharded_server_answers_like_the_unsharded_one(model_dir, reference, extra):
    got = serve_and_complete(model_dir, extra)
    assert all(text for text, _ in reference)
    assert got == reference


def test_dummy_weights_serve_sharded_like_unsharded(config_only_dir):
    one = serve_and_complete(config_only_dir, ["--load-format", "dummy", "--dummy-seed", "3"])
    two = serve_and_complete(config_only_dir, ["--load-format", "dummy", "--dummy-seed", "3", "-tp", "2"])
    assert two == one
    other_seed = serve_and_complete(config_only_dir, ["--load-format", "dummy", "--dummy-seed", "4"])
    assert other_seed != one


def test_uneven_split_is_refused_at_startup(model_dir):
    # 2 attention heads cannot split over 3 ranks: exit 2 with the reason, no hang.
    r = subprocess.run([mxserve_binary_path(), "serve", "--port", "0", "--model", str(model_dir), "-tp", "3",
                        "--threads", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "does not split over 3 ranks" in r.stderr


def test_generate_cli_tp2_matches_tp1(model_dir):
    def gen(extra):
        r = subprocess.run([mxserve_binary_path(), "generate", "--model", str(model_dir), "--prompt-ids",
                            "3,17,250,9,31", "--max-tokens", "8", "--ignore-eos", "--threads", "2", *extra],
                           capture_output=True, text=True, timeout=300, check=True)
        return r.stdout.splitlines()[0]
    assert gen(["--tensor-parallel-size", "2"]) == gen([])
    assert gen(["--tensor-parallel-size", "2", "--enable-expert-parallel"]) == gen([])
