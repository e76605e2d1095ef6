#!/usr/bin/env bash
# Session 8's device calls for the MoE prefill (path 5), one script so that
# each call is reproducible from the repository:
#   bench/mxfp4/prefill_s8_call.sh 1|2|3 OUT_DIR   (binaries on PATH: gpu_unbundle.sh)
# Call 1: the wide gate_up items (ws_gate_up_items 2) beside auto at 8192
# tokens with per-phase times; their correctness at 512 (3 persistent CTAs too)
# and 4096 tokens; the SS kernel with setmaxnreg at 8192 (it hung in session 7:
# own timeout); ncu of the wide gate_up. Call 2: the copy cursor's L2 prefetch
# and lead ("L2 prefetch", "stages - 1" rows: their code is now only in
# raw-prefill-2026-12-01-s8/*.patch, so these filters select nothing today).
# Call 3: auto (wide gate_up) beside the session-7 auto and wide down (removed
# since, patch in the raw folder). `full` (not run this session): the final
# table, ops_parity and the torch peer.
set -uo pipefail
call=$1 out=$2
source bench/mxfp4/prefill_call_common.sh
if [[ $call == 1 ]]; then
  bench b8192 100 --moe-tokens 8192 --moe-only "auto|128 rows x 256|wait_group 2, down 3/4"
  bench b512 45 --moe-tokens 512 --moe-only "128 rows x 256|warp-specialized, 3 CTAs|prefill on wgmma, warp-specialized"
  bench b4096 45 --moe-tokens 4096 --moe-only "auto|128 rows x 256"
  bench ss8192 40 --moe-tokens 8192 --moe-only "SS wgmma: gate_up"
  timeout 60 ncu --clock-control none -k regex:moe_ws_wide --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --page raw mxfp4_bench --moe-prefill --moe-tokens 8192 \
    --moe-only "128 rows x 256" > "$out/ncu-raw.txt" 2>&1 || echo "ncu: exit $?"
  bash bench/mxfp4/prefill_ncu_keys.sh "$out/ncu-raw.txt" | tee "$out/ncu-keys.txt" | head -40
elif [[ $call == 2 ]]; then
  bench b8192 100 --moe-tokens 8192 --moe-only "auto|128 rows x 256|L2 prefetch|stages - 1"
elif [[ $call == 3 ]]; then
  bench b8192 36 --moe-tokens 8192 --moe-only "auto|both GEMMs|256 rows x 128"
else
  bench b8192 70 --moe-tokens 8192 --moe-only "auto|256 rows x 128|128 rows x 256|wait_group 2, down 3/4|SS wgmma: gate_up"
  timeout 90 ops_parity --golden tests/golden > "$out/ops_parity.log" 2>&1; echo "ops_parity exit $?"
  tail -4 "$out/ops_parity.log"
  PYTHONUNBUFFERED=1 timeout 60 python3 bench/mxfp4/peers_run.py --peers .carry/mxfp4_peers.py \
    --moe-tokens 8192 --json "$out/peers.jsonl" > "$out/peers.log" 2>&1 || echo "peers failed"
  grep -i moe "$out/peers.log" | cut -c1-300
  bench b6144 40 --moe-tokens 6144 --moe-only "auto|256 rows x 128|gate_up items 128 rows x 256 pairs"
  bench b2048 20 --moe-tokens 2048 --moe-only "auto"
fi
