#!/usr/bin/env bash
# Session 23's ncu call: per-instruction warp-stall samples (SourceCounters) and the
# warp-state, scheduler, memory and speed-of-light sections of single launches of main's
# automatic dense kernels on the GPU machine, clocks as found (--clock-control none):
#   ring32 / ring64: kernel 11 at 36864x7168, 32 / 64 tokens (the automatic plan: producer
#   warp + 16 consumer warps; the second launch of `mxfp4_bench --profile --dense`'s first
#   and fourth kernel-11 configurations), pair16: kernel 9 at 36864x7168, 16 tokens.
#   bench/mxfp4/stalls_s23_call.sh MXFP4_BENCH OUT_DIR
set -uo pipefail
bench=$1 out=$2
mkdir -p "$out"
prof() {
  local name=$1 skip=$2 kernel=$3 part=$4
  timeout 150 ncu --clock-control none -k "regex:$kernel" --launch-skip "$skip" --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats \
    --section MemoryWorkloadAnalysis -o "$out/$name" -f "$bench" --profile "$part" > "$out/$name-run.txt" 2>&1 ||
    echo "ncu $name: exit $?"
  ncu --import "$out/$name.ncu-rep" --page details > "$out/$name-details.txt" 2>&1
  ncu --import "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name-sass.csv" 2>&1
  python3 bench/mxfp4/ncu_source_stalls.py "$out/$name-sass.csv" 45 > "$out/$name-stalls.txt" 2>&1
  head -14 "$out/$name-stalls.txt" | cut -c1-160
  rm -f "$out/$name.ncu-rep"
  xz -f "$out/$name-sass.csv"
}
prof ring32 1 dense_ws_kernel --dense
prof ring64 7 dense_ws_kernel --dense
prof pair16 1 dense_pair_kernel --dense-small
