# Compact table of an `ncu --csv --print-units base --metrics ...` dump: one line per
# profiled kernel (time in us, DRAM %, MB read, grid, block, registers, occupancy,
# warp instructions). Used for bench/mxfp4/raw-moe-decode-2026-12-01/*ncu*.txt:
#   python3 bench/mxfp4/ncu_summary.py ncu.csv
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
hdr = rows[0]
ix = {h: i for i, h in enumerate(hdr)}
kern = {}
order = []
for r in rows[1:]:
    key = (r[ix["ID"]], r[ix["Kernel Name"]])
    if key not in kern:
        kern[key] = {}
        order.append(key)
    kern[key][r[ix["Metric Name"]]] = r[ix["Metric Value"]]
short = {"gpu__time_duration.sum": "us", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
         "launch__grid_size": "grid", "launch__block_size": "block", "launch__registers_per_thread": "regs",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%", "sm__inst_executed.sum": "inst",
         "dram__bytes_read.sum": "MB read",
         # The memory side (session 21's ring probes):
         "lts__t_sectors_op_read.sum": "L2 read MB", "lts__t_sector_op_read_hit_rate.pct": "L2 hit%",
         "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2%",
         "l1tex__m_xbar2l1tex_read_bytes.sum": "xbar->SM MB", "sm__cycles_elapsed.avg.per_second": "MHz"}
for key in order:
    m = kern[key]
    # Mangled names (--print-kernel-base mangled) keep the template arguments.
    name = key[1] if key[1].startswith("_Z") else key[1].split("(")[0].split("::")[-1]
    name = name.split("_cu_")[-1][-60:]
    vals = []
    for k, s in short.items():
        if k in m:
            v = m[k].replace(",", "")
            if k == "gpu__time_duration.sum": v = "%.2f" % (float(v) / 1000)
            if k in ("dram__bytes_read.sum", "l1tex__m_xbar2l1tex_read_bytes.sum"): v = "%.1f" % (float(v) / 1e6)
            if k == "lts__t_sectors_op_read.sum": v = "%.1f" % (float(v) * 32 / 1e6)
            if k == "sm__cycles_elapsed.avg.per_second": v = "%.0f" % (float(v) / 1e6)
            vals.append(f"{s}={v}")
    print(key[0], name, " ".join(vals))
