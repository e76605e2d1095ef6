#!/usr/bin/env bash
# Issue 9's scale measurement: the seed's two benchmark commands (10,240 in /
# 512 out; 10 prompts at concurrency 2, 160 at concurrency 40) through
# `mxserve bench serve` against `mxserve serve` on a Kimi-K2.5-shaped model at
# full width (hidden 7168, 64 heads, the real MLA dims, 384 experts top-8, the
# real 163,840-token vocabulary and tokenizer) with LAYERS layers,
# --load-format dummy MXFP4 experts (the amd/Kimi-K2.5-MXFP4 layout: Quark
# MXFP4 experts, BF16 attention / shared experts / dense MLP / lm_head), an FP8
# KV cache and -tp TP. The server runs with --profile-ops: its log ends with
# the device time of every op per decode step (per batch-size bucket) and per
# prefill step, the per-layer breakdown (scripts/kimi_profile_table.py turns it
# into a table and an extrapolation to 61 layers).
#   scripts/gpu_kimi_bench.sh --bundle FILE.tar.xz --tokenizer DIR [--layers N] [--tp N] [--ep]
#       [--prompts "10 160"] [--concurrency "2 40"] [--device cuda] [--out DIR] [--small]
#       [--no-profile] [-- extra serve flags]
# --no-profile: serve without --profile-ops (which times every op and so runs
# decode steps op by op, without CUDA graphs); no per-layer table then.
# --small keeps the synthetic preset's widths (only the vocabulary is real): a
# smoke test of this script on the CPU backend (--device cpu).
# BENCH_TIMEOUTS="S1 S2" bounds each benchmark run (default 900 s each).
# DIR (--tokenizer) holds Kimi's tiktoken.model and tokenizer_config.json (copy them from
# shared/data/tokenizers/kimi into a carried folder). Needs mxserve on PATH or in the bundle.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle="" tok="" layers=8 tp=2 ep="" out=${OUT:-/tmp/mx-kimi-bench} device=cuda
prompts=(10 160) concurrency=(2 40) extra=() gpu_util=0.9 max_seqs=40 small=0 profile=(--profile-ops)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle=$2; shift 2 ;;
    --tokenizer) tok=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --tp) tp=$2; shift 2 ;;
    --ep) ep="--enable-expert-parallel"; shift ;;
    --prompts) read -r -a prompts <<< "$2"; shift 2 ;;
    --concurrency) read -r -a concurrency <<< "$2"; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --gpu-memory-utilization) gpu_util=$2; shift 2 ;;
    --max-num-seqs) max_seqs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --small) small=1; shift ;;
    --no-profile) profile=(); shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$tok" && -f "$tok/tiktoken.model" ]] || { echo "--tokenizer DIR with tiktoken.model is required" >&2; exit 2; }
# shellcheck disable=SC1090
if [[ -n "$bundle" ]]; then source scripts/gpu_unbundle.sh "$bundle"; fi
mkdir -p "$out"
model="${TMPDIR:-/tmp}/mx-kimi-bench-model/kimi-k25-full-width-${layers}l"  # not under --out: few files there
rm -rf "$model" && mkdir -p "$model"
bench_timeout=(${BENCH_TIMEOUTS:-900 900})  # seconds per concurrency level, so the profile is still written
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  echo "date: $(date -u +%FT%TZ)"
  echo "layers $layers, -tp $tp $ep, FP8 KV, dummy MXFP4 weights, device $device"
} | tee "$out/run.txt"

# The config: the synthetic Kimi-K2.5 MXFP4 checkpoint's (its Quark
# quantization_config is the amd checkpoint's) at the real model's widths.
mxserve synth --preset kimi-k25-mxfp4 --out "$model.synth" > /dev/null || exit 1
python3 - "$model.synth/config.json" "$model/config.json" "$layers" "$small" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
t = c["text_config"]
full = dict(hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=int(sys.argv[3]),
         num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384, num_experts_per_tok=8,
         n_shared_experts=1, first_k_dense_replace=1, vocab_size=163840, q_lora_rank=1536, kv_lora_rank=512,
         qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_group=1, topk_group=1,
         max_position_embeddings=262144, routed_scaling_factor=2.827)
t.update(dict(num_hidden_layers=int(sys.argv[3]), vocab_size=163840) if sys.argv[4] == "1" else full)
for k in ("bos_token_id", "eos_token_id", "pad_token_id", "media_placeholder_token_id"):
    c.pop(k, None); t.pop(k, None)
t["bos_token_id"], t["eos_token_id"] = 163584, 163586
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
rm -rf "$model.synth"
cp "$tok/tiktoken.model" "$model/tiktoken.model"
cp "$tok/tokenizer_config.json" "$model/tokenizer_config.json"

port=18555
t0=$SECONDS
mxserve serve --model "$model" --load-format dummy --device "$device" --tensor-parallel-size "$tp" $ep \
  --kv-cache-dtype fp8 --max-model-len 10752 --max-num-seqs "$max_seqs" --gpu-memory-utilization "$gpu_util" \
  "${profile[@]}" --port "$port" "${extra[@]}" > "$out/serve.log" 2>&1 &
pid=$!
ready=0
for _ in $(seq 1 3000); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && { ready=1; break; }
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.2
done
if [[ $ready != 1 ]]; then
  echo "server not ready:"; tail -20 "$out/serve.log"; kill "$pid" 2> /dev/null; exit 1
fi
echo "server ready in $((SECONDS - t0)) s (dummy weights made on the host and uploaded)" | tee -a "$out/run.txt"
grep -h "ready:\|in use after loading\|KV cache" "$out/serve.log" | cut -c1-400 | tee -a "$out/run.txt"

status=0
for i in "${!prompts[@]}"; do
  n=${prompts[$i]} c=${concurrency[$i]}
  t1=$SECONDS
  # The seed's command, flag for flag (only the base URL and the result file differ).
  timeout "${bench_timeout[$i]:-900}" mxserve bench serve --model="$model" --backend=vllm --base-url="http://127.0.0.1:$port" \
    --trust-remote-code --dataset-name=random --random-input-len=10240 --random-output-len=512 \
    --random-range-ratio=1.0 --num-prompts="$n" --max-concurrency="$c" --request-rate=inf \
    --percentile-metrics=ttft,tpot,itl,e2el --save-result --result-dir "$out" \
    --result-filename "kimi-${layers}l-tp${tp}${ep:+-ep}-c$c.json" > "$out/bench-c$c.txt" 2>&1 || status=1
  sed -n '/Serving Benchmark Result/,$p' "$out/bench-c$c.txt"
  mv "$out"/*.html "${TMPDIR:-/tmp}/" 2> /dev/null  # the HTML report duplicates the JSON; keeps --out small
  echo "(concurrency $c: $((SECONDS - t1)) s)"
done
kill -INT "$pid"; wait "$pid" 2> /dev/null
echo "CUDA graphs recorded: $(grep -c "recorded a CUDA graph" "$out/serve.log")" | tee -a "$out/run.txt"
if [[ ${#profile[@]} -gt 0 ]]; then
  grep -q "op profile" "$out/serve.log" || { echo "no op profile in serve.log:"; tail -5 "$out/serve.log"; status=1; }
  python3 scripts/kimi_profile_table.py "$out/serve.log" --layers "$layers" --tp "$tp" | tee "$out/profile.md"
fi
exit $status
