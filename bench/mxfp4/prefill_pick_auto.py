#!/usr/bin/env python3
"""Prints the MoeConfig::ws_dequant that won a `mxfp4_bench --moe-prefill` run
(JSON lines): 1 (auto row, the RS kernel) unless an SS row (dequant warpgroup:
2 = gate_up, 3 = both GEMMs) ran >= 2% faster at W4A16; used by a device call
to run ops_parity with the matching build.
  bench/mxfp4/prefill_pick_auto.py bench.jsonl"""
import json, sys

rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("mode") == "W4A16" and "CUDA graph" not in r["note"]:
        rows[r["note"].split(", events")[0]] = r["us"]
base = "warp-specialized, dequant warpgroup + SS wgmma: "
cands = [(rows["auto"] * 0.98, 1), (rows.get(base + "gate_up", 1e12), 2),
         (rows.get(base + "both, down 8 steps deferred", 1e12), 3)]
print(min(cands)[1])
