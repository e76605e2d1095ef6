#!/usr/bin/env bash
# Session 20's GPU call, as it ran (one call held everything: the session got one machine):
#   source scripts/gpu_unbundle.sh BUNDLE && bench/mxfp4/pipes_s20_call.sh BUNDLE PEERS OUT_DIR
# BUNDLE: scripts/gpu_bundle.sh of mxserve, ops_parity, attention_parity, sampler_parity, mxfp4_bench;
# PEERS: shared/peers/mxfp4_peers.py copied beside it.
# 1. scripts/gpu_all.sh (-> OUT/all, gpu_all.txt)   2. scripts/gpu_issue8.sh (-> OUT/issue8, issue8.txt)
# 3. mxfp4_bench --mma-rates (-> rates.jsonl): instruction rates alone on every SM (mma_rates.cu)
# 4. ncu (SpeedOfLight, ComputeWorkloadAnalysis, WarpStateStats) of the automatic kernels at 8 / 16 tokens
#    (mxfp4_bench --profile --dense-small -> small-details.txt).
# Records: bench/gpu/2026-12-03-session20/final/ (1-2), bench/mxfp4/raw-pipes-2026-12-03-s20/ (3-4).
source bench/mxfp4/validation_call_common.sh "$@"  # 1-2: gpu_all, gpu_issue8
(timeout 35 mxfp4_bench --mma-rates --json "$out/rates.jsonl" > "$out/rates.log" 2>&1)
(timeout 40 ncu --clock-control none -k regex:dense --section SpeedOfLight --section ComputeWorkloadAnalysis \
   --section WarpStateStats -o "$out/small" -f mxfp4_bench --profile --dense-small > "$out/small.log" 2>&1
 ncu --import "$out/small.ncu-rep" --page details > "$out/small-details.txt" 2>&1
 rm -f "$out/small.ncu-rep")
tail -32 "$out/issue8.txt"
tail -4 "$out/gpu_all.txt"
python3 - "$out/rates.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kernel"] == "mma_rate":
        print(f"{r['shape'][:36]:36s} warps/SM {r['M']:2d} {r['us']:9.1f} us {r.get('sm_mhz', 0):5.0f} MHz  {r['note']}")
PY
