#!/usr/bin/env bash
# The CUDA backend's device test script (issue 7): everything that needs a GPU,
# in one call on the GPU machine, with a summary table last.
#   scripts/gpu_all.sh --bundle FILE.tar.xz [--model GGUF_OR_DIR] [--seed-bench] [--out DIR]
# The bundle (scripts/gpu_bundle.sh, built here with -DMXSERVE_CUDA=ON) holds
# mxserve, ops_parity, attention_parity and sampler_parity. Steps:
#   1. ops_parity: every non-attention op and the whole golden models, CUDA vs CPU
#   2. attention_parity: KV store/gather, paged/dense attention, MLA decode, CUDA vs CPU
#   3. sampler_parity: the GPU sampler vs the CPU sampler
#   4. gpu_e2e_check.sh: generate + serve greedy answers cuda vs cpu on a synthetic
#      Llama and a Kimi-K2.5-shaped MXFP4 model (and --model if given), tokens/s.
#      Default numerics: logits within 2% of the largest cpu logit, answers equal
#      or parting at a near tie (closer than twice the measured logit difference);
#      --model (the default model): generate identical. Again with --exact-numerics
#      on the GPU (the CPU's F32 numerics): everything identical.
#   5. --seed-bench: the seed's two `bench serve` commands (10,240 in / 512 out;
#      10 prompts at concurrency 2, 160 at 40) against `mxserve serve --device cuda`
#      on --model (SmolLM2's context is 8,192: served with --allow-long-max-model-len)
# Logs and bench JSON go to --out (default $OUT or /tmp/mx-all).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle="" model="" seed_bench=0 out=${OUT:-/tmp/mx-all}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seed-bench) seed_bench=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$bundle" ]] || { echo "--bundle is required" >&2; exit 2; }
# shellcheck disable=SC1090
source scripts/gpu_unbundle.sh "$bundle"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee -a "$out/gpu.txt"
summary=()
step() {  # name, seconds limit, command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -25 "$out/$name.log"
  summary+=("$(printf '%-18s %-6s %5ss' "$name" "$([[ $rc == 0 ]] && echo PASS || echo "FAIL($rc)")" $((SECONDS - t0)))")
}
step ops_parity 150 ops_parity --golden tests/golden
step attention_parity 180 attention_parity
step sampler_parity 120 sampler_parity
e2e_args=()
[[ -n "$model" ]] && e2e_args=(--model "$model")
# Default numerics (BF16 activations between kernels): the logits must stay
# within 2% of the largest CPU logit; greedy answers may part only at near ties
# (closer than twice the measured logit difference), generate included.
step e2e_synthetic 300 env WORK=/tmp/mx-e2e scripts/gpu_e2e_check.sh --skip-cpu-throughput --allow-parting
# The same with the CPU's F32 numerics on the GPU: answers must match exactly.
step e2e_synth_exact 300 env WORK=/tmp/mx-e2e-exact scripts/gpu_e2e_check.sh --skip-cpu-throughput --decode-tokens 16 \
  --cuda-flags --exact-numerics
[[ -n "$model" ]] && step e2e_model 300 env WORK=/tmp/mx-e2e-model scripts/gpu_e2e_check.sh --skip-cpu-throughput "${e2e_args[@]}"

if [[ $seed_bench == 1 && -n "$model" ]]; then
  mxserve serve --model "$model" --device cuda --port 8000 --max-model-len 10752 --allow-long-max-model-len \
    --gpu-memory-utilization 0.5 --max-num-seqs 64 >"$out/seed-serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do curl -sf http://127.0.0.1:8000/health >/dev/null 2>&1 && break; sleep 0.2; done
  grep -h "ready:" "$out/seed-serve.log"
  for cfg in "10 2" "160 40"; do
    set -- $cfg
    step "seed_bench_c$2" $(( $2 == 2 ? 120 : 200 )) mxserve bench serve --model="$model" --backend=vllm --base-url=http://127.0.0.1:8000 \
      --trust-remote-code --dataset-name=random --random-input-len=10240 --random-output-len=512 \
      --random-range-ratio=1.0 --num-prompts="$1" --max-concurrency="$2" --request-rate=inf \
      --percentile-metrics=ttft,tpot,itl,e2el --save-result --result-dir "$out" \
      --result-filename "seed-c$2.json"
    cat "$out/seed_bench_c$2.log" | sed -n '/Serving Benchmark Result/,$p'
  done
  kill "$pid"; wait "$pid" 2>/dev/null
fi
echo
echo "=== summary ($(cat "$out/gpu.txt" | head -1))"
printf '%s\n' "${summary[@]}"
