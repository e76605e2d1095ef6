"""`mxserve serve -tp 2 --nnodes 2` (docs/parallel.md, "Multi-node"): node 1 is
a second process that loads rank 1's shard and follows node 0's plan over TCP
(CPU ranks meet in the tcp communicator). On a synthetic Kimi-K2.5 MXFP4
checkpoint, node 0's greedy completions equal the single-process -tp 2 and
-tp 1 servers'; killing node 1 mid-run makes node 0 exit non-zero naming the
lost node within seconds; a node with another config.json is refused."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, mxserve_binary_path, serve_process, synth_kimi
from tokenizer_helpers import KIMI_DIR

pytestmark = pytest.mark.skipif(not (KIMI_DIR / "tiktoken.model").exists(), reason="shared Kimi tokenizer data missing")

PROMPTS = [[5, 17, 300, 2], [1000, 3, 3, 3, 3, 3], [42], [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]]
COMMON = ["--served-model-name", "m", "--max-model-len", "128", "--num-kv-blocks", "64", "--threads", "1"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, mxserve_binary):
    return synth_kimi(tmp_path_factory.mktemp("kimi-synth-mn"))


def complete(base, prompt, max_tokens=12):
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        choice = json.loads(r.read())["choices"][0]
    return choice["text"], choice["finish_reason"]


def single_process(model, extra):
    with serve_process(["--model", str(model), *COMMON, *extra]) as (base, _):
        return [complete(base, p) for p in PROMPTS]


def start_node1(model, port, extra=()):
    """Node 1 as a process; its output goes to a log file read by the caller."""
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"mxserve-node1-{port}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([mxserve_binary_path(), "serve", "--model", str(model), *COMMON, "-tp", "2", "--nnodes",
                             "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
                             "--node-timeout", "60", *extra], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, log_path


def node0_args(model, port):
    return ["--model", str(model), *COMMON, "-tp", "2", "--nnodes", "2", "--node-rank", "0", "--master-port",
            str(port), "--node-timeout", "60"]


def serve_log(base):
    """The log file conftest.serve_process writes node 0's output to."""
    return (Path(os.environ.get("TMPDIR", "/tmp")) / f"mxserve-serve-{base.rsplit(':', 1)[1]}.log").read_text()


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def test_two_nodes_answer_like_one_process(model_dir):
    tp1 = single_process(model_dir, [])
    tp2 = single_process(model_dir, ["-tp", "2"])
    port = free_port()
    node1, node1_log = start_node1(model_dir, port)
    try:
        with serve_process(node0_args(model_dir, port)) as (base, node0):
            two_nodes = [complete(base, p) for p in PROMPTS]
        assert node0.returncode == 0
        # Node 0's shutdown ends the group: node 1 exits cleanly.
        assert node1.wait(timeout=30) == 0, node1_log.read_text()[-2000:]
    finally:
        stop(node1)
    assert all(text for text, _ in tp1)
    assert two_nodes == tp2
    assert two_nodes == tp1
    assert "joined node 0" in node1_log.read_text()


def stream_until_killed(base, kill):
    """Streams a long completion, calls kill() after the first tokens; returns
    the number of chunks received and whether the stream ended with an error."""
    body = {"model": "m", "prompt": PROMPTS[3], "max_tokens": 110, "temperature": 0, "ignore_eos": True,
            "stream": True}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    chunks, failed = 0, False
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            for line in r:
                if not line.startswith(b"data: {"):
                    continue
                event = json.loads(line[6:])
                failed = failed or "error" in event
                chunks += 1
                if chunks == 3:
                    kill()
    except OSError:  # the connection may be cut when node 0 stops
        failed = True
    return chunks, failed


def test_losing_node_1_mid_run_stops_node_0_with_its_name(model_dir):
    port = free_port()
    node1, _ = start_node1(model_dir, port)
    try:
        with serve_process(node0_args(model_dir, port)) as (base, node0):
            killed_at = []

            def kill():
                node1.send_signal(signal.SIGKILL)
                killed_at.append(time.time())
            chunks, failed = stream_until_killed(base, kill)
            code = node0.wait(timeout=20)
            took = time.time() - killed_at[0]
            log = serve_log(base)
    finally:
        stop(node1)
    assert failed and chunks < 110, f"the request was not cut short ({chunks} chunks)"
    assert code == 1, log[-3000:]
    assert took < 10, f"node 0 took {took:.1f} s to stop"
    assert "stopped because node 1 is gone" in log, log[-3000:]


def test_losing_node_1_while_idle_stops_node_0(model_dir):
    port = free_port()
    node1, _ = start_node1(model_dir, port)
    try:
        with serve_process(node0_args(model_dir, port)) as (base, node0):
            assert complete(base, PROMPTS[0])[0]
            node1.send_signal(signal.SIGKILL)
            code = node0.wait(timeout=20)
            log = serve_log(base)
    finally:
        stop(node1)
    assert code == 1, log[-3000:]
    assert "stopped because node 1 is gone" in log, log[-3000:]


def test_node_with_another_config_is_refused(model_dir, tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    for f in model_dir.iterdir():
        (other / f.name).symlink_to(f)
    config = json.loads((model_dir / "config.json").read_text())
    config["rms_norm_eps"] = config.get("rms_norm_eps", 1e-6) * 2
    (other / "config.json").unlink()
    (other / "config.json").write_text(json.dumps(config))
    port = free_port()
    node1, node1_log = start_node1(other, port)
    try:
        node0 = subprocess.run([mxserve_binary_path(), "serve", "--port", "0", *node0_args(model_dir, port)],
                               capture_output=True, text=True, timeout=60)
        assert node1.wait(timeout=30) == 2, node1_log.read_text()[-2000:]
    finally:
        stop(node1)
    assert node0.returncode == 2, node0.stderr[-2000:]
    assert "its config.json hash is" in node0.stderr
    refusal = node1_log.read_text()
    assert "node 0 refused this node" in refusal and "config.json hash" in refusal, refusal[-2000:]
