# Sourced by the bench/mxfp4/prefill_s*_call.sh scripts (which set `out`):
# the GPU's name and clocks into $out/gpu.txt, and
#   bench NAME TIMEOUT ARGS...   mxfp4_bench --moe-prefill ARGS into $out/NAME.{jsonl,log}, its MoE rows printed.
#   rows NAME ARGS...            ${bench:-mxfp4_bench} --moe-prefill ARGS (150 s at most), its MoE rows
#                                without the graph rows, short columns.
#   repeat_rows N NAME ARGS...   rows NAME-1 .. NAME-N with the same ARGS (runs of one call).
#   stalls NAME KERNEL_REGEX FILTER   ncu's per-instruction stall sampling of one launch at 8192 tokens,
#                                     summarized by bench/mxfp4/ncu_source_stalls.py.
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
bench() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" mxfp4_bench --moe-prefill --json "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?" | tee -a "$out/$name.log"
  grep -E '^\| fused_moe' "$out/$name.log" | cut -d'|' -f4,5,6,9,10,11 | cut -c1-260
}
stalls() {
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
rows() {
  local name=$1
  shift
  timeout 150 "${bench:-mxfp4_bench}" --moe-prefill --json "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?"
  grep -E '^\| fused_moe' "$out/$name.log" | grep -v "CUDA graph" | cut -d'|' -f4,5,6,8,9,10,11,12 |
    sed -E "s/err on 32 tokens, phases us \(median of 10\)://" | cut -c1-230
}
repeat_rows() {
  local n=$1 name=$2 r
  shift 2
  for r in $(seq "$n"); do rows "$name-$r" "$@"; done
}
