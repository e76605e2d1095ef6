"""The CUDA kernel-choice flags (--mxfp4-gemm-kernel, --moe-kernel,
--w4a4-mma) on a build or device that cannot honour them: a clear error and
exit status, never a silent fallback. (Forced kernels on a GPU are exercised by
ops_parity's forced-kernel cases, scripts/gpu_all.sh.)"""
import subprocess

import pytest

from conftest import mxserve_binary_path, synth_kimi


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, mxserve_binary):
    return synth_kimi(tmp_path_factory.mktemp("kimi-synth-flags"))


def generate(model_dir, *flags):
    return subprocess.run([mxserve_binary_path(), "generate", "--model", str(model_dir), "--prompt-ids", "3,17",
                           "--max-tokens", "2", "--threads", "2", *flags], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("flag,value", [("--mxfp4-gemm-kernel", "fastest"), ("--moe-kernel", "magic"),
                                        ("--w4a4-mma", "fp4")])
def test_unknown_kernel_name_is_refused_with_the_choices(model_dir, flag, value):
    r = generate(model_dir, flag, value)
    assert r.returncode != 0
    assert value in r.stderr and "auto" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("flag,value", [("--mxfp4-gemm-kernel", "tiled"), ("--moe-kernel", "prefill-tiles"),
                                        ("--w4a4-mma", "fp8")])
def test_cpu_refuses_a_forced_cuda_kernel(model_dir, flag, value):
    r = generate(model_dir, "--device", "cpu", flag, value)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "select CUDA kernels" in r.stderr, r.stderr[-2000:]


def test_auto_is_accepted_on_cpu(model_dir):
    r = generate(model_dir, "--mxfp4-gemm-kernel", "auto", "--moe-kernel", "auto")
    assert r.returncode == 0, r.stderr[-2000:]
