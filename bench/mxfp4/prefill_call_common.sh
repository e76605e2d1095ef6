# Sourced by the bench/mxfp4/prefill_s*_call.sh scripts (which set `out`):
# the GPU's name and clocks into $out/gpu.txt, and
#   bench NAME TIMEOUT ARGS...   mxfp4_bench --moe-prefill ARGS into $out/NAME.{jsonl,log}, its MoE rows printed.
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
bench() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" mxfp4_bench --moe-prefill --json "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?" | tee -a "$out/$name.log"
  grep -E '^\| fused_moe' "$out/$name.log" | cut -d'|' -f4,5,6,9,10,11 | cut -c1-260
}
