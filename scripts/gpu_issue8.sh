#!/usr/bin/env bash
# Issue #8's kernels in one device call: the MXFP4 bench's bit-exact checks
# (W4A4 quantizer, device re-layout), its decode, dense and
# MoE-prefill parts (each row checked against the element-wise reference on
# fresh random inputs with NaN-poisoned outputs, timed beside the byte floor
# from the copy bandwidth measured in the same process), the same-call peers
# (Triton dot_scaled, cuBLAS BF16, torch BF16 grouped GEMM), the correctness
# verdict (bench/mxfp4/report.py: exit 1 on a row over its bound) and, last,
# the targets as a short table (bench/mxfp4/scorecard.py).
#   scripts/gpu_issue8.sh --bench MXFP4_BENCH --peers mxfp4_peers.py [--out DIR] [--no-prefill] [--no-peers] [--fp8] [--pack]
# --fp8: also the dense W4A4 rows on FP8 tensor cores (mxfp4_bench --dense-fp8, ~3 min; the
# scorecard then judges them beside the W4A16 ones).
# --pack: at the end, DIR's files go into DIR.tar.gz and only the scorecard stays
# beside it (the device tool brings back about 8 files per call; session 22 lost
# dense.log and the peers' logs to that limit).
# Built elsewhere and carried (scripts/gpu_bundle.sh): MXFP4_BENCH is the
# binary's name on PATH after gpu_unbundle.sh, e.g. --bench mxfp4_bench.
set -uo pipefail
cd "$(dirname "$0")/.."
bench="" peers="" out=${OUT:-/tmp/mx-issue8} prefill=1 with_peers=1 pack=0 fp8=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-prefill) prefill=0; shift ;;
    --no-peers) with_peers=0; shift ;;
    --pack) pack=1; shift ;;
    --fp8) fp8=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$bench" ]] || { echo "--bench is required" >&2; exit 2; }
[[ $with_peers == 0 || -f "$peers" ]] || { echo "--peers FILE (mxfp4_peers.py) is required, or --no-peers" >&2; exit 2; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
echo "date: $(date -u +%FT%TZ)" | tee -a "$out/gpu.txt"
failed=0  # a bench part that dies fails the run even if the rows it wrote pass
parts=(checks decode dense dense-small)
[[ $prefill == 1 ]] && parts+=(moe-prefill)
[[ $fp8 == 1 ]] && parts+=(dense-fp8)
for part in "${parts[@]}"; do
  echo "=== mxfp4_bench --$part"
  limit=200; [[ $part == dense-fp8 ]] && limit=300
  if ! timeout "$limit" "$bench" "--$part" --json "$out/$part.jsonl" >"$out/$part.log" 2>&1; then
    echo "BENCH --$part FAILED: see $part.log"; tail -5 "$out/$part.log"; failed=1
  fi
  grep -c '"kernel"' "$out/$part.jsonl" 2>/dev/null | sed 's/^/rows: /'
done
jsonl=()
for part in "${parts[@]}"; do [[ -f "$out/$part.jsonl" ]] && jsonl+=("$out/$part.jsonl"); done
cat "${jsonl[@]}" /dev/null >"$out/bench.jsonl"
# bench.jsonl holds every part's rows: the parts' copies would double the records (5 MB of
# them dropped in session 23, when the repo's size decided whether a call's bundle fits).
[[ ${#jsonl[@]} -gt 0 ]] && rm -f "${jsonl[@]}"
peer_files=()
if [[ $with_peers == 1 ]]; then
  echo "=== peers"
  moe_tokens=(1 2 8 40)
  [[ $prefill == 1 ]] && moe_tokens+=(8192)
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/mxfp4/peers_run.py --peers "$peers" --decode --moe-tokens "${moe_tokens[@]}" \
    --json "$out/peers-decode.jsonl" >"$out/peers.log" 2>&1 || echo "peers --decode failed (see peers.log)"
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/mxfp4/peers_run.py --peers "$peers" --dense --json "$out/peers-dense.jsonl" \
    >>"$out/peers.log" 2>&1 || echo "peers --dense failed (see peers.log)"
  for f in "$out"/peers-*.jsonl; do [[ -f "$f" ]] && peer_files+=("$f"); done
  cat "${peer_files[@]}" /dev/null >"$out/peers.jsonl"
fi
echo "=== verdict"
python3 bench/mxfp4/report.py "$out/bench.jsonl" ${peer_files[@]+"$out/peers.jsonl"} >"$out/table.md"
rc=$?
tail -4 "$out/table.md"
echo
echo "=== issue #8 targets ($(head -2 "$out/gpu.txt" | tail -1 | cut -d, -f1), $(tail -1 "$out/gpu.txt"))"
python3 bench/mxfp4/scorecard.py "$out/bench.jsonl" ${peer_files[@]+"$out/peers.jsonl"} | tee "$out/scorecard.md"
[[ $failed == 0 ]] || { echo "verdict: FAIL (a bench part failed)"; rc=1; }
if [[ $pack == 1 ]]; then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")" && cp "$out/scorecard.md" "$out.scorecard.md" &&
    rm -rf "$out" && echo "packed: $out.tar.gz"
fi
exit $rc
