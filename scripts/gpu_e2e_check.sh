#!/usr/bin/env bash
# End-to-end check of serving on a GPU against the CPU backend (needs an
# H100/H200 and an mxserve built with -DMXSERVE_CUDA=ON on PATH, e.g. from a
# scripts/gpu_bundle.sh bundle; MXSERVE=path overrides).
#   (a) without --model: writes a synthetic Llama and a Kimi-K2.5-shaped MXFP4
#       checkpoint with `mxserve synth` into $WORK (plus a byte-level
#       tokenizer.json, so that serve can run them);
#   (b) `mxserve generate` greedy on --device cpu and --device cuda: the
#       tokens must be identical;
#   (c) `mxserve serve` on cpu, on cuda, and on cuda sampling on the cpu:
#       greedy /v1/completions and /v1/chat/completions answers (text, tokens,
#       finish reason). cuda must equal cuda-with-the-cpu-sampler exactly (same
#       logits); cpu and cuda must be identical, or first differ where the cpu's
#       two best tokens were within max(--near-tie, 2 x the max logit difference (b)
#       measured) nats, --near-tie default 0.05 (the backends round differently;
#       random synthetic weights give flat distributions full of near ties);
#   (d) output tokens/s of the cuda and the cpu server, 1, 8 and 32 concurrent
#       requests (short prompts, --decode-tokens each, ignore_eos); a table last.
# Exit status 1 if any comparison differs.
#   scripts/gpu_e2e_check.sh [--model DIR_OR_GGUF]... [--decode-tokens N]
#       [--gpu-memory-utilization F] [--skip-cpu-throughput] [--near-tie NATS]
#       [--logit-tol F] [--moe-logit-tol F] [--allow-parting]
#       [--cuda-flags "FLAGS"]   extra flags for every cuda run, e.g. "--exact-numerics"
#                                (the CPU's F32 numerics: answers must then match exactly)
#       [--serve-flags "FLAGS"]  extra flags for the cuda servers only, e.g. "--enforce-eager"
set -euo pipefail
MX=${MXSERVE:-mxserve}
WORK=${WORK:-/tmp/mx-e2e}
DECODE_TOKENS=128
GPU_UTIL=0.3
NEAR_TIE=0.05
LOGIT_TOL=0.02
MOE_LOGIT_TOL=0.15
STRICT_GENERATE=1
CPU_THROUGHPUT=1
CUDA_FLAGS=""
SERVE_FLAGS=""
models=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) models+=("$2"); shift 2 ;;
    --decode-tokens) DECODE_TOKENS=$2; shift 2 ;;
    --gpu-memory-utilization) GPU_UTIL=$2; shift 2 ;;
    --skip-cpu-throughput) CPU_THROUGHPUT=0; shift ;;
    --near-tie) NEAR_TIE=$2; shift 2 ;;
    --logit-tol) LOGIT_TOL=$2; shift 2 ;;
    --moe-logit-tol) MOE_LOGIT_TOL=$2; shift 2 ;;
    --allow-parting) STRICT_GENERATE=0; shift ;;
    --cuda-flags) CUDA_FLAGS=$2; shift 2 ;;
    --serve-flags) SERVE_FLAGS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK"
HERE=$(cd "$(dirname "$0")" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# A byte-level BPE tokenizer.json (ids 0..255 = bytes, the rest specials) and
# a chat template, for the synthetic checkpoints, which have no tokenizer.
write_tokenizer() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
out, vocab_size, eos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
byte_char, extra = {}, 0
for b in range(256):  # GPT-2's byte -> unicode map
    if b in printable:
        byte_char[b] = chr(b)
    else:
        byte_char[b] = chr(256 + extra); extra += 1
vocab = {byte_char[b]: b for b in range(256)}
added = []
for i in range(256, vocab_size):
    name = "<|eos|>" if i == eos else f"<|reserved_{i}|>"
    vocab[name] = i
    added.append({"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True})
level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": level,
           "post_processor": None, "decoder": level,
           "model": {"type": "BPE", "vocab": vocab, "merges": [], "byte_fallback": False}},
          open(f"{out}/tokenizer.json", "w"))
json.dump({"eos_token": "<|eos|>", "add_bos_token": False,
           "chat_template": "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                            "{% if add_generation_prompt %}<assistant>{% endif %}"},
          open(f"{out}/tokenizer_config.json", "w"))
EOF
}

if [[ ${#models[@]} -eq 0 ]]; then
  for preset in llama kimi-k25-mxfp4; do
    dir=$WORK/$preset
    rm -rf "$dir"
    "$MX" synth --out "$dir" --preset "$preset" --seed 7
    read -r vocab eos < <(python3 -c "
import json; c = json.load(open('$dir/config.json')); t = c.get('text_config', c)
e = t.get('eos_token_id', c.get('eos_token_id')); e = e[0] if isinstance(e, list) else e
print(t['vocab_size'], e)")
    write_tokenizer "$dir" "$vocab" "$eos"
    models+=("$dir")
  done
fi

is_moe() {  # checkpoint directory with routed experts in config.json (a GGUF file: no)
  [[ -f "$1/config.json" ]] && python3 - "$1/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
t = c.get("text_config", c)
sys.exit(0 if t.get("n_routed_experts") or t.get("num_local_experts") or t.get("num_experts") else 1)
PY
}

fail=0
results=$WORK/results.txt
: > "$results"

wait_ready() {  # port pid log
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then echo "server exited:"; tail -20 "$3"; return 1; fi
    sleep 0.2
  done
  echo "server on port $1 not ready"; tail -20 "$3"; return 1
}

for model in "${models[@]}"; do
  name=$(basename "$model")
  echo "=== $name ($model)"
  # (b) generate, greedy, token for token, with the logits of every step.
  gen() { "$MX" generate --model "$model" --prompt-ids 1,17,33,65,129,200,7,9 --max-tokens 32 --ignore-eos --device "$@"; }
  cpu_gen=$(gen cpu --logits-out "$WORK/$name.cpu-logits.json" | head -1)
  # shellcheck disable=SC2086
  cuda_gen=$(gen cuda $CUDA_FLAGS --logits-out "$WORK/$name.cuda-logits.json" | head -1)
  # The logits, step by step up to the first parting: max |cuda - cpu| over the
  # largest |cpu logit| must stay under LOGIT_TOL. The near-tie allowance of (c)
  # for this model is then max(NEAR_TIE, 2 x the measured max |cuda - cpu|):
  # a parting is accepted only where the cpu's two best tokens are closer than
  # twice the rounding difference this very check measured.
  read -r rel abs_diff < <(python3 - "$WORK/$name.cpu-logits.json" "$WORK/$name.cuda-logits.json" <<'PY'
import json, sys
ref, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a_steps, b_steps = [ref["prompt_logits"]] + ref["step_logits"], [got["prompt_logits"]] + got["step_logits"]
part = next((i for i, (x, y) in enumerate(zip(ref["tokens"], got["tokens"])) if x != y), None)
upto = len(a_steps) if part is None else part + 1
diff = scale = 0.0
for a, b in zip(a_steps[:upto], b_steps[:upto]):
    diff = max(diff, max(abs(x - y) for x, y in zip(a, b)))
    scale = max(scale, max(abs(x) for x in a))
print(f"{diff / scale:.4g} {diff:.4g}")
PY
)
  model_near_tie=$(python3 -c "print(max($NEAR_TIE, 2 * $abs_diff))")
  tol=$LOGIT_TOL
  is_moe "$model" && tol=$MOE_LOGIT_TOL
  if python3 -c "import sys; sys.exit(0 if $rel < $tol else 1)"; then
    echo "logits: max |cuda - cpu| = $abs_diff, $rel of the largest logit (< $tol): PASS; near-tie allowance $model_near_tie nats"
  else
    echo "logits: max |cuda - cpu| = $abs_diff, $rel of the largest logit (>= $tol): FAIL"; fail=1
  fi
  if [[ "$cpu_gen" == "$cuda_gen" ]]; then echo "generate: identical ($cpu_gen)"
  elif [[ $STRICT_GENERATE == 1 ]]; then echo "generate: DIFFERENT"; echo "  cpu:  $cpu_gen"; echo "  cuda: $cuda_gen"; fail=1
  else echo "generate: parts from the cpu (accepted: the logits check above bounds the difference)"; echo "  cpu:  $cpu_gen"; echo "  cuda: $cuda_gen"; fi

  # (c) serve on both devices; the same greedy answers.
  "$MX" serve --model "$model" --device cpu --port 18401 --kv-cache-memory-gib 1 --max-num-seqs 64 \
      >"$WORK/serve-cpu.log" 2>&1 &
  cpu_pid=$!
  # shellcheck disable=SC2086
  "$MX" serve --model "$model" --device cuda $CUDA_FLAGS $SERVE_FLAGS --port 18402 --gpu-memory-utilization "$GPU_UTIL" --max-num-seqs 64 \
      >"$WORK/serve-cuda.log" 2>&1 &
  cuda_pid=$!
  # shellcheck disable=SC2086
  "$MX" serve --model "$model" --device cuda $CUDA_FLAGS $SERVE_FLAGS --sampling-device cpu --port 18403 --kv-cache-memory-gib 1 \
      --max-num-seqs 64 >"$WORK/serve-cuda-cpusampler.log" 2>&1 &
  cuda_cpu_pid=$!
  if wait_ready 18401 $cpu_pid "$WORK/serve-cpu.log" && wait_ready 18402 $cuda_pid "$WORK/serve-cuda.log" &&
     wait_ready 18403 $cuda_cpu_pid "$WORK/serve-cuda-cpusampler.log"; then
    grep -h "ready:\|GPU .* in use" "$WORK/serve-cuda.log" | sed 's/^/  cuda server: /' | cut -c1-400
    python3 "$HERE/gpu_e2e_client.py" compare 18401 18402 18403 "$model_near_tie" "$STRICT_GENERATE" || fail=1
    python3 "$HERE/gpu_e2e_client.py" throughput 18402 "$name" cuda "$DECODE_TOKENS" >>"$results" || fail=1
    python3 "$HERE/gpu_e2e_client.py" throughput 18403 "$name" cuda+cpu-sampler "$DECODE_TOKENS" >>"$results" || fail=1
    if [[ $CPU_THROUGHPUT == 1 ]]; then
      python3 "$HERE/gpu_e2e_client.py" throughput 18401 "$name" cpu "$DECODE_TOKENS" >>"$results" || fail=1
    fi
  else
    fail=1
  fi
  kill "$cpu_pid" "$cuda_pid" "$cuda_cpu_pid" 2>/dev/null || true
  wait "$cpu_pid" "$cuda_pid" "$cuda_cpu_pid" 2>/dev/null || true
done

echo
echo "output tokens/s (prompt of 8 tokens, $DECODE_TOKENS generated per request, greedy, ignore_eos; wall time includes prefill)"
printf "%-20s %-17s %12s %12s %10s\n" model device concurrency "tokens/s" "seconds"
cat "$results"
[[ $fail == 0 ]] && echo "PASS" || echo "FAIL"
exit $fail
