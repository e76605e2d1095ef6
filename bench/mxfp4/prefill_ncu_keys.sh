#!/usr/bin/env bash
# The lines of an `ncu --page raw` dump that docs/mxfp4-prefill.md quotes (time,
# tensor pipe, issue, eligible warps, stall reasons, shared-memory banks, L2):
#   bench/mxfp4/prefill_ncu_keys.sh ncu-raw.txt
grep -E "^  [a-z_]+::|moe_ws|gpu__time_duration.sum |sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active|sm__issue_active.avg.pct|smsp__warps_eligible.avg.per_cycle_active|stalled_(wait|long_scoreboard|barrier|dispatch_stall|math_pipe_throttle|short_scoreboard|mio_throttle|membar|sleeping)_per_issue_active|l1tex__data_bank_(reads|writes).avg.pct_of_peak_sustained_elapsed|lts__t_sectors.avg.pct_of_peak_sustained_elapsed" "$1" |
  sed -E 's/ {2,}/ /g' | cut -c1-160
