#!/usr/bin/env bash
# Session 21's validation call: main's binaries through every GPU check, and the dense ring kernel's
# timing probes (leave out the MMAs, the dequant, the weights' or B's copies) beside it, in one call:
#   source scripts/gpu_unbundle.sh BUNDLE && bench/mxfp4/probes_s21_call.sh BUNDLE PEERS OUT_DIR
# BUNDLE: scripts/gpu_bundle.sh of mxserve, ops_parity, attention_parity, sampler_parity, mxfp4_bench;
# PEERS: shared/peers/mxfp4_peers.py copied beside it.
# 1. scripts/gpu_all.sh (-> OUT/all, gpu_all.txt)
# 2. scripts/gpu_issue8.sh (-> OUT/issue8, issue8.txt; its --dense part holds the probe rows, kernel gemm_probe)
source bench/mxfp4/validation_call_common.sh "$@"  # 1-2: gpu_all, gpu_issue8
tail -32 "$out/issue8.txt"
tail -4 "$out/gpu_all.txt"
# The 32 / 64-token rows of kernel 11's producer plans and probes at the two large shapes, then the
# graph rows (in call 5, at d7f8ca4, "auto" ran kernel 11's launches chained under PDL and "no PDL" without;
# the chain was reverted in fee7be4).
grep -h 'producer\|PROBE\|ws ring auto' "$out/issue8/dense.log" | grep '36864x7168\|7168x18432' |
  grep '| 32 \|| 64 ' | grep -v bigscale | cut -d'|' -f3,4,6,8,11,12
grep -h 'CUDA graph' "$out/issue8/dense.log" | grep '36864x7168\|7168x18432' | grep '| 32 \|| 64 ' |
  grep -v bigscale | cut -d'|' -f3,4,6,8,11,12 | cut -c1-110
