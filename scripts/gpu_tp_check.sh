#!/usr/bin/env bash
# Tensor / expert parallelism on GPUs (docs/parallel.md): NCCL communicators,
# one rank per GPU, against the unsharded model. Needs >= 2 sm_90 GPUs and an
# mxserve built with -DMXSERVE_CUDA=ON (from a scripts/gpu_bundle.sh bundle:
# --bundle FILE, or MXSERVE=path, or mxserve on PATH).
#   (a) writes synthetic Llama (GQA) and Kimi-K2.5 MXFP4 (MLA + MoE)
#       checkpoints with `mxserve synth` into $WORK, plus a byte-level
#       tokenizer.json so that serve can run them;
#   (b) `mxserve generate --logits-out` greedy: cpu TP=1 (reference), cuda
#       TP=1, cuda TP=2, cuda TP=2 + --enable-expert-parallel (MoE model).
#       Each sharded run must give cuda TP=1's tokens and logits within --tol
#       of the largest logit (relative max difference), compared up to the
#       first token where they part; parting is accepted only where cuda
#       TP=1's two best logits were within --near-tie;
#   (c) `mxserve serve --device cuda` TP=1 vs -tp 2 (and -tp 2 with EP):
#       greedy /v1/completions answers on token-id prompts must be equal, or
#       first part where TP=1's two best tokens (its logprobs) were within
#       --near-tie, the rule of (b);
#   (d) with --full-width LAYERS: a Kimi-K2.5-shaped config at full width
#       (hidden 7168, 64 heads, 384 experts, MLA dims of the real model),
#       LAYERS layers, --load-format dummy MXFP4 weights, generate on TP=2 and
#       TP=2 + EP: load time and tokens/s (an extrapolation to 61 layers is
#       NOT made here).
# The table comes last; exit status 1 if any row fails.
#   scripts/gpu_tp_check.sh [--bundle FILE.tar.xz] [--tp N] [--tol F] [--near-tie F] [--full-width LAYERS]
set -euo pipefail
cd "$(dirname "$0")/.."
MX=${MXSERVE:-mxserve}
WORK=${WORK:-/tmp/mx-tp}
# DEVICE=cpu runs the same checks on the CPU backend (in-process communicator;
# a dry run of this script on a machine without GPUs).
DEVICE=${DEVICE:-cuda}
TP=2
TOL=0.02
NEAR_TIE=0.05
FULL_WIDTH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) # shellcheck disable=SC1090
      source scripts/gpu_unbundle.sh "$2"; MX=/tmp/mxbundle/bin/mxserve; shift 2 ;;
    --tp) TP=$2; shift 2 ;;
    --tol) TOL=$2; shift 2 ;;
    --near-tie) NEAR_TIE=$2; shift 2 ;;
    --full-width) FULL_WIDTH=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
# NVLink multicast must stay off on the lent machines (mxserve also sets it when unset).
export NCCL_NVLS_ENABLE=0
mkdir -p "$WORK"
if [[ $DEVICE == cuda ]]; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  GPUS=$(nvidia-smi -L | wc -l)
  if (( GPUS < TP )); then echo "need $TP GPUs, found $GPUS" >&2; exit 2; fi
fi
git log -1 --format='commit %h %cd' 2>/dev/null || true
date -u
ROWS="$WORK/rows.tsv"
: > "$ROWS"

# Byte-level BPE tokenizer.json (ids 0..255 = bytes, no merges; the rest of the
# vocabulary are specials) for the synthetic checkpoints.
write_tokenizer() {
  python3 - "$1" <<'EOF'
import json, sys
d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
text = cfg.get("text_config", cfg)
vocab_size, eos = text["vocab_size"], text["eos_token_id"]
keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
to_char, n = {}, 0
for b in range(256):
    if b in keep:
        to_char[b] = chr(b)
    else:
        to_char[b] = chr(256 + n); n += 1
vocab = {to_char[b]: b for b in range(256)}
added = [{"id": i, "content": f"<|special_{i}|>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for i in range(256, vocab_size)]
for a in added:
    vocab[a["content"]] = a["id"]
level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": level,
           "post_processor": None, "decoder": level,
           "model": {"type": "BPE", "vocab": vocab, "merges": [], "byte_fallback": False}},
          open(f"{d}/tokenizer.json", "w"))
json.dump({"eos_token": f"<|special_{eos}|>", "bos_token": None, "add_bos_token": False},
          open(f"{d}/tokenizer_config.json", "w"))
EOF
}

PROMPT_IDS=3,17,250,9,31,77,5,130,64,8,12
generate() {  # model out device tp [extra...]
  local model=$1 out=$2 device=$3 tp=$4; shift 4
  local t0=$SECONDS
  "$MX" generate --model "$model" --prompt-ids "$PROMPT_IDS" --max-tokens 16 --ignore-eos --device "$device" \
    --kv-cache-dtype bf16 --tensor-parallel-size "$tp" --logits-out "$out" "$@" > "$out.stdout" 2> "$out.log" \
    || { echo "generate failed ($model $device tp=$tp $*):"; tail -20 "$out.log"; return 1; }
  echo "  generate $(basename "$model") $device tp=$tp $* ($((SECONDS - t0)) s): $(head -1 "$out.stdout")"
}

# rows: check | case | tokens | max rel logit diff | verdict
compare() {  # name reference candidate [info: never fails]
  python3 - "$1" "$2" "$3" "$TOL" "$NEAR_TIE" "${4:-}" >> "$ROWS" <<'EOF'
import json, sys
name, ref_path, got_path, tol, near = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
ref, got = json.load(open(ref_path)), json.load(open(got_path))
steps_ref = [ref["prompt_logits"]] + ref["step_logits"]
steps_got = [got["prompt_logits"]] + got["step_logits"]
part = next((i for i, (a, b) in enumerate(zip(ref["tokens"], got["tokens"])) if a != b), None)
upto = len(steps_ref) if part is None else part + 1  # logits of the parting step are still comparable
diff = scale = 0.0
for a, b in zip(steps_ref[:upto], steps_got[:upto]):
    diff = max(diff, max(abs(x - y) for x, y in zip(a, b)))
    scale = max(scale, max(abs(x) for x in a))
rel = diff / scale
ok = rel < tol
tokens = "equal"
if part is not None:
    top = sorted(steps_ref[part], reverse=True)
    gap = top[0] - top[1]
    tokens = f"part at {part} (gap {gap:.3g})"
    ok = ok and gap < near
verdict = "INFO" if sys.argv[6] == "info" else "PASS" if ok else "FAIL"
print(f"{name}\t{tokens}\t{rel:.3g}\t{verdict}")
EOF
}

echo "== (a) synthetic checkpoints in $WORK"
for preset in llama kimi-k25-mxfp4; do
  "$MX" synth --preset "$preset" --out "$WORK/$preset" > /dev/null
  write_tokenizer "$WORK/$preset"
done

echo "== (b) generate: logits of sharded runs vs $DEVICE TP=1"
for preset in llama kimi-k25-mxfp4; do
  m="$WORK/$preset"
  generate "$m" "$WORK/$preset.cpu1.json" cpu 1
  generate "$m" "$WORK/$preset.dev1.json" "$DEVICE" 1
  compare "$preset $DEVICE tp=1 vs cpu tp=1 (context)" "$WORK/$preset.cpu1.json" "$WORK/$preset.dev1.json" info
  generate "$m" "$WORK/$preset.dev$TP.json" "$DEVICE" "$TP"
  compare "$preset $DEVICE tp=$TP vs $DEVICE tp=1" "$WORK/$preset.dev1.json" "$WORK/$preset.dev$TP.json"
  if [[ $preset == kimi* ]]; then
    generate "$m" "$WORK/$preset.dev${TP}ep.json" "$DEVICE" "$TP" --enable-expert-parallel
    compare "$preset $DEVICE tp=$TP+ep vs $DEVICE tp=1" "$WORK/$preset.dev1.json" "$WORK/$preset.dev${TP}ep.json"
  fi
done

echo "== (c) serve: greedy completions, -tp $TP vs TP=1"
serve_answers() {  # model out [extra...]
  local model=$1 out=$2; shift 2
  local port=$((20000 + RANDOM % 20000))
  "$MX" serve --model "$model" --device "$DEVICE" --port "$port" --served-model-name m --max-model-len 256 \
    --num-kv-blocks 64 "$@" > "$out.log" 2>&1 &
  local pid=$!
  python3 - "$port" "$out" "$pid" <<'EOF' || { kill "$pid" 2>/dev/null; tail -20 "$out.log"; return 1; }
import json, os, sys, time, urllib.request
port, out, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = f"http://127.0.0.1:{port}"
deadline = time.time() + 600
while True:
    try:
        if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
            break
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit("server not ready in 600 s")
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server exited")
    time.sleep(1)
answers = []
for prompt in ([5, 17, 300, 2], [1000, 3, 3, 3, 3, 3], [42], list(range(7, 40))):
    body = {"model": "m", "prompt": prompt, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "logprobs": 2}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    c = json.loads(urllib.request.urlopen(req, timeout=300).read())["choices"][0]
    top2 = [sorted(d.values(), reverse=True)[:2] for d in c["logprobs"]["top_logprobs"]]
    answers.append([c["text"], c["finish_reason"], c["logprobs"]["tokens"], top2])
json.dump(answers, open(out, "w"))
EOF
  kill -TERM "$pid"; wait "$pid" || true
}
m="$WORK/kimi-k25-mxfp4"
serve_answers "$m" "$WORK/serve1.json"
for variant in "-tp $TP" "-tp $TP --enable-expert-parallel"; do
  # shellcheck disable=SC2086
  serve_answers "$m" "$WORK/serve-variant.json" $variant
  python3 - "$variant" "$WORK/serve1.json" "$WORK/serve-variant.json" "$DEVICE" "$NEAR_TIE" >> "$ROWS" <<'EOF'
import json, sys
a, b, near = json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), float(sys.argv[5])
same, ok, partings = 0, True, []
for x, y in zip(a, b):
    if x[:3] == y[:3]:
        same += 1
        continue
    # The first differing token must be a near tie of TP=1's two best (the
    # same rule as the generate comparison above).
    i = next((k for k, (p, q) in enumerate(zip(x[2], y[2])) if p != q), min(len(x[2]), len(y[2])))
    gap = x[3][i][0] - x[3][i][1] if i < len(x[3]) and len(x[3][i]) == 2 else None
    ok = ok and gap is not None and gap < near
    partings.append(f"part at {i} (gap {gap:.3g})" if gap is not None else f"part at {i}")
answers = f"{same}/{len(a)} completions equal" + (f", {'; '.join(partings)}" if partings else "")
print(f"serve kimi-k25-mxfp4 {sys.argv[4]} {sys.argv[1]} vs tp=1\t{answers}\t-\t{'PASS' if ok else 'FAIL'}")
EOF
done

if (( FULL_WIDTH > 0 )); then
  echo "== (d) full-width Kimi-K2.5 shape, $FULL_WIDTH layers, dummy MXFP4 weights"
  fw="$WORK/kimi-full-width"
  mkdir -p "$fw"
  python3 - "$WORK/kimi-k25-mxfp4/config.json" "$fw/config.json" "$FULL_WIDTH" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
t = c["text_config"]
t.update(hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=int(sys.argv[3]),
         num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384, num_experts_per_tok=8,
         n_shared_experts=1, first_k_dense_replace=1, vocab_size=163840, q_lora_rank=1536, kv_lora_rank=512,
         qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_group=1, topk_group=1)
for k in ("bos_token_id", "eos_token_id", "pad_token_id", "media_placeholder_token_id"):
    c.pop(k, None); t.pop(k, None)
t["eos_token_id"] = 163585
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
  for extra in "" "--enable-expert-parallel"; do
    t0=$SECONDS
    # shellcheck disable=SC2086
    "$MX" generate --model "$fw" --load-format dummy --device "$DEVICE" --tensor-parallel-size "$TP" $extra \
      --prompt-ids "$PROMPT_IDS" --max-tokens 16 --ignore-eos --kv-cache-dtype fp8 > "$fw/gen.out" 2> "$fw/gen.log" \
      && echo -e "full width $FULL_WIDTH layers tp=$TP $extra\t$(grep generation "$fw/gen.out")\t$((SECONDS - t0)) s incl. load\tINFO" >> "$ROWS" \
      || { tail -5 "$fw/gen.log"; echo -e "full width $FULL_WIDTH layers tp=$TP $extra\tfailed\t-\tFAIL" >> "$ROWS"; }
  done
fi

echo
echo "tolerance: relative max logit difference < $TOL; tokens may part only where the reference's top-2 gap < $NEAR_TIE"
printf '%-58s | %-28s | %-10s | %s\n' "check" "tokens / answers" "rel diff" "verdict"
while IFS=$'\t' read -r name tokens diff verdict; do
  printf '%-58s | %-28s | %-10s | %s\n' "$name" "$tokens" "$diff" "$verdict"
done < "$ROWS"
! grep -q $'\tFAIL$' "$ROWS"
