# Sourced by the session call scripts (pipes_s20_call.sh, probes_s21_call.sh) with their arguments
# BUNDLE PEERS OUT_DIR: sets bundle, peers, out, then runs main's binaries through every GPU check:
# 1. scripts/gpu_all.sh (-> OUT/all, gpu_all.txt)   2. scripts/gpu_issue8.sh (-> OUT/issue8, issue8.txt)
set -uo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 BUNDLE PEERS OUT_DIR" >&2; exit 2; }
bundle=$1 peers=$2 out=$3
mkdir -p "$out"
(timeout 200 scripts/gpu_all.sh --bundle "$bundle" --out "$out/all" > "$out/gpu_all.txt" 2>&1)
(timeout 300 scripts/gpu_issue8.sh --bench mxfp4_bench --peers "$peers" --out "$out/issue8" > "$out/issue8.txt" 2>&1)
