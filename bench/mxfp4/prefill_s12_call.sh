#!/usr/bin/env bash
# Session 12's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s12_call.sh 1|2 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: auto at 8192 tokens (phases), then per-instruction stall sampling
# (ncu SourceCounters) of the wide gate_up kernel and of down, summarized by
# bench/mxfp4/ncu_source_stalls.py (1g: its gate_up part alone). Call 2: the
# producer warpgroup (bench_new) beside HEAD's kernels (bench_base) at 8192
# and 2048 tokens, every path-5 variant at 512 and 4096. Call 3: call 1's
# stall sampling of the kernels with the producer warpgroup. Call 4: B multicast
# over 2-CTA clusters in the wide gate_up (bench_mc) beside bench_head.
set -uo pipefail
call=$1 out=$2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
bench() {  # bench NAME TIMEOUT ARGS...
  local name=$1 limit=$2
  shift 2
  timeout "$limit" mxfp4_bench --moe-prefill --json "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?" | tee -a "$out/$name.log"
  grep -E '^\| fused_moe' "$out/$name.log" | cut -d'|' -f4,5,6,9,10,11 | cut -c1-260
}
stalls() {  # stalls NAME KERNEL_REGEX FILTER
  local name=$1 kernel=$2 filter=$3
  timeout 150 ncu --clock-control none -k "regex:$kernel" --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --section SchedulerStats --section MemoryWorkloadAnalysis \
    -o "$out/$name" -f mxfp4_bench --moe-prefill --moe-tokens 8192 --moe-only "$filter" > "$out/$name-run.txt" 2>&1 ||
    echo "ncu $name: exit $?"
  ncu --import "$out/$name.ncu-rep" --page raw > "$out/$name-raw.txt" 2>&1
  bash bench/mxfp4/prefill_ncu_keys.sh "$out/$name-raw.txt" | tee "$out/$name-keys.txt" | head -20
  ncu --import "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name-sass.csv" 2>&1
  python3 bench/mxfp4/ncu_source_stalls.py "$out/$name-sass.csv" 45 | tee "$out/$name-stalls.txt" | cut -c1-200
  rm -f "$out/$name.ncu-rep" "$out/$name-raw.txt"  # the device tool brings back a few files only
  xz -f "$out/$name-sass.csv"
}
if [[ $call == 1 ]]; then
  bench b8192 120 --moe-tokens 8192 --moe-only "auto"
  stalls gateup moe_ws_wide "auto"
  stalls down moe_ws_kernel "auto"
elif [[ $call == 2 ]]; then  # the producer warpgroup (bench_new) beside HEAD's kernels (bench_base)
  ab() {  # ab TOKENS FILTER: base, new, base, new
    for b in base new base new; do
      timeout 90 bench_$b --moe-prefill --moe-tokens "$1" --moe-only "$2" --json "$out/ab-$1-$b.jsonl" 2>&1 |
        grep -E '^\| fused_moe' | grep -v "CUDA graph" | cut -d'|' -f4,5,6,8,9,10,11,12 |
        sed -E "s/err on 32 tokens, phases us \(median of 10\)://; s/^/$b /" | cut -c1-230
    done
  }
  ab 8192 "auto"
  ab 2048 "auto"
  for t in 512 4096; do
    timeout 150 bench_new --moe-prefill --moe-tokens $t --json "$out/all-$t.jsonl" > "$out/all-$t.log" 2>&1 || echo "all-$t: exit $?"
    grep -E '^\| fused_moe' "$out/all-$t.log" | cut -d'|' -f4,5,6,8,9,10,12 | cut -c1-200
  done
elif [[ $call == 3 ]]; then  # call 1's stall sampling again, on the producer-warpgroup kernels
  stalls gateup moe_ws_wide "auto"
  stalls down moe_ws_kernel "auto"
elif [[ $call == 4 ]]; then  # B multicast over 2-CTA clusters (bench_mc) beside the producer warpgroup (bench_head)
  for b in head mc head mc; do
    timeout 90 bench_$b --moe-prefill --moe-tokens 8192 --moe-only "auto" --json "$out/ab-8192-$b.jsonl" 2>&1 |
      grep -E '^\| fused_moe' | grep -v "CUDA graph\|256 rows" | cut -d'|' -f5,6,8,9,10,11,12 |
      sed -E "s/err on 32 tokens, phases us \(median of 10\)://; s/^/$b /" | cut -c1-200
  done
  for t in 512 4096 8192; do
    timeout 90 bench_mc --moe-prefill --moe-tokens $t --moe-only "128 rows x 256" --json "$out/mc-$t.jsonl" > "$out/mc-$t.log" 2>&1 || echo "mc-$t: exit $?"
    grep -E '^\| fused_moe' "$out/mc-$t.log" | cut -d'|' -f4,5,6,8,9,10,12 | cut -c1-200
  done
elif [[ $call == 1g ]]; then  # call 1's gate_up part again (its files did not come back)
  stalls gateup moe_ws_wide "auto"
fi
