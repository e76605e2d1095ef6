"""bench/mxfp4/ncu_source_stalls.py: the per-instruction stall summary of an
`ncu --page source --csv --print-source sass` export (the kernel-name line
before the header, ncu's own == messages, trailing commas, the "(Not Issued)"
duplicates of every reason column)."""
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "bench" / "mxfp4" / "ncu_source_stalls.py"

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"Instructions Executed","stall_long_sb","stall_wait","stall_selected",'
          '"stall_long_sb (Not Issued)","stall_wait (Not Issued)",')


def csv_row(addr, src, total, executed, long_sb, wait, selected):
    return (f'"{addr}","{src}","{total}","{total - selected}","{executed}","{long_sb}","{wait}","{selected}",'
            f'"{long_sb}","{wait}",')


def summarize(tmp_path, lines, top="2"):
    f = tmp_path / "sass.csv"
    f.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, str(TOOL), str(f), top], capture_output=True, text=True, timeout=60)


def test_summary_orders_instructions_and_sums_reasons(tmp_path):
    r = summarize(tmp_path, [
        '==PROF== Connected to process 1',
        '"Kernel Name","void k(Params)",',
        HEADER,
        csv_row("0x10", "LOP3.LUT R1, R2, 0x81c081c0, RZ, 0xc0, !PT", 30, 1000, 0, 20, 10),
        csv_row("0x20", "@!P0 BRA 0x7f00", 60, 1000, 55, 0, 5),
        csv_row("0x30", "HGMMA.64x128x16.F32.BF16 R24, R120, gdesc[UR4], R24", 10, 1000, 0, 2, 8),
    ])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "total samples 100"
    # reasons summed over instructions, largest first, without the "(Not Issued)" copies
    assert out[1] == "stall_long_sb 55 (55.0%), stall_selected 23 (23.0%), stall_wait 22 (22.0%)"
    # the two instructions with the most samples, most first, with their largest reasons
    assert len(out) == 4
    assert out[2].split()[:3] == ["0x20", "60", "60.0%"] and "long_sb 55, selected 5" in out[2]
    assert out[3].split()[:3] == ["0x10", "30", "30.0%"] and "wait 20, selected 10" in out[3]


def test_a_file_without_rows_is_an_error(tmp_path):
    r = summarize(tmp_path, ['==PROF== Disconnected', '==ERROR== no kernel was profiled'])
    assert r.returncode != 0
    assert "no CSV rows" in r.stderr
