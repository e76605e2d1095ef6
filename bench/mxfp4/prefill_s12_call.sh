#!/usr/bin/env bash
# Session 12's device calls for the MoE prefill (path 5), reproducible from the repository:
#   bench/mxfp4/prefill_s12_call.sh 1|1g|2|3|4 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: auto at 8192 tokens (phases), then per-instruction stall sampling
# (ncu SourceCounters) of the wide gate_up kernel and of down, summarized by
# bench/mxfp4/ncu_source_stalls.py (1g: its gate_up part alone). Call 2: the
# producer warpgroup (bench_new) beside HEAD's kernels (bench_base) at 8192
# and 2048 tokens, every path-5 variant at 512 and 4096. Call 3: call 1's
# stall sampling of the kernels with the producer warpgroup. Call 4: B multicast
# over 2-CTA clusters in the wide gate_up (bench_mc) beside bench_head.
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
ab() {  # ab TOKENS FILTER A B: bench_A, bench_B, bench_A, bench_B at TOKENS, the rows printed (graph rows left out)
  local tokens=$1 filter=$2 b
  for b in $3 $4 $3 $4; do
    timeout 90 bench_$b --moe-prefill --moe-tokens "$tokens" --moe-only "$filter" --json "$out/ab-$tokens-$b.jsonl" 2>&1 |
      grep -E '^\| fused_moe' | grep -v "CUDA graph" | cut -d'|' -f4,5,6,8,9,10,11,12 |
      sed -E "s/err on 32 tokens, phases us \(median of 10\)://; s/^/$b /" | cut -c1-230
  done
}
every_row() {  # every_row BIN TOKENS [FILTER]: bench_BIN's rows at TOKENS into $out/BIN-TOKENS.{jsonl,log}
  local bin=$1 tokens=$2
  local only=()
  [[ $# -gt 2 ]] && only=(--moe-only "$3")  # an empty --moe-only would select no row
  timeout 150 bench_$bin --moe-prefill --moe-tokens "$tokens" "${only[@]}" --json "$out/$bin-$tokens.jsonl" \
    > "$out/$bin-$tokens.log" 2>&1 || echo "$bin-$tokens: exit $?"
  grep -E '^\| fused_moe' "$out/$bin-$tokens.log" | cut -d'|' -f4,5,6,8,9,10,12 | cut -c1-200
}
if [[ $call == 1 ]]; then
  bench b8192 120 --moe-tokens 8192 --moe-only "auto"
  stalls gateup moe_ws_wide "auto"
  stalls down moe_ws_kernel "auto"
elif [[ $call == 2 ]]; then  # the producer warpgroup (bench_new) beside HEAD's kernels (bench_base)
  ab 8192 "auto" base new
  ab 2048 "auto" base new
  for t in 512 4096; do every_row new $t; done  # (committed as all-$t.*: the script named them so then)
elif [[ $call == 3 ]]; then  # call 1's stall sampling again, on the producer-warpgroup kernels
  stalls gateup moe_ws_wide "auto"
  stalls down moe_ws_kernel "auto"
elif [[ $call == 4 ]]; then  # B multicast over 2-CTA clusters (bench_mc) beside the producer warpgroup (bench_head)
  ab 8192 "auto" head mc
  for t in 512 4096 8192; do every_row mc $t "128 rows x 256"; done
elif [[ $call == 1g ]]; then  # call 1's gate_up part again (its files did not come back)
  stalls gateup moe_ws_wide "auto"
fi
