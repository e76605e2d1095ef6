"""bench/mxfp4/report.py's verdict: the GPU bench's rows become a pass/fail
result (exit status 1 naming the rows) instead of numbers someone has to read.
The rows follow mxfp4_bench's JSON lines."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "bench" / "mxfp4" / "report.py"


def row(kernel, rel_err=1e-4, unwritten=0, **extra):
    r = {"kernel": kernel, "shape": "s", "M": 1, "mode": "W4A16", "us": 10.0, "floor_us": 5.0,
         "ratio": 2.0, "rel_err": rel_err, "unwritten": unwritten, "touched": 0.0, "note": "auto"}
    r.update(extra)
    return r


def report(tmp_path, rows):
    f = tmp_path / "bench.jsonl"
    f.write_text("device: H200\n" + "\n".join(json.dumps(r) for r in rows) + "\n")
    return subprocess.run([sys.executable, str(REPORT), str(f)], capture_output=True, text=True, timeout=60)


GOOD = [row("copy", rel_err=-1, unwritten=-1), row("gemm", rel_err=1.66e-3), row("fused_moe", rel_err=1.2e-4),
        row("w4a4_quantizer", rel_err=0, unwritten=0), row("device_pack", rel_err=0, unwritten=0),
        # a row that names its own bound (the prefill path's BF16 expert outputs)
        row("fused_moe", rel_err=1.67e-3, err_bound=5e-3), row("fused_moe", rel_err=1.1e-4, err_bound=0)]


def test_rows_within_bounds_pass(tmp_path):
    r = report(tmp_path, GOOD)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict: PASS (7 rows checked)" in r.stdout
    assert "| gemm | s | 1 |" in r.stdout  # the table is still printed


@pytest.mark.parametrize("bad,why", [
    (row("gemm", rel_err=0.3), "rel err 0.3 above 5e-03"),
    (row("fused_moe", rel_err=2e-3), "rel err 0.002 above 1e-03"),
    (row("fused_moe", rel_err=2e-3, err_bound=0), "rel err 0.002 above 1e-03"),  # 0: the kernel's default
    (row("fused_moe", rel_err=6e-3, err_bound=5e-3), "rel err 0.006 above 5e-03"),
    (row("fused_moe", rel_err=1e-5, unwritten=17), "17 unwritten"),
    (row("fused_moe", rel_err=-1), "rel err -1 above"),  # a checked kernel without an error figure
    (row("w4a4_quantizer", rel_err=0, unwritten=3), "3 unwritten/mismatching"),
])
def test_a_failing_row_fails_the_report_and_is_named(tmp_path, bad, why):
    r = report(tmp_path, GOOD + [bad])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "verdict: FAIL" in r.stdout and why in r.stdout, r.stdout
