# Why ∂input's wide BF16 product takes twice a forward product's time at the same shape: stalls and memory metrics.
R=$OUT
M=gpu__time_duration.sum,sm__inst_issued.sum
for s in long_scoreboard barrier wait mio_throttle lg_throttle short_scoreboard math_pipe_throttle membar dispatch_stall no_instruction selected not_selected tex_throttle drain branch_resolving sleeping; do M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
M=$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
timeout 200 ncu --clock-control none --profile-from-start off -k regex:"linear_(gelu_forward|backward_input|backward_weight)_wide_bf16" -c 3 --metrics $M --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py 2048 1024 bf16 > $R/ncu-stalls.csv 2>/dev/null
python3 - $R/ncu-stalls.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); v = h.index("Metric Value"); i = h.index("ID")
table = {}
for r in rows[1:]:
    table.setdefault(r[m], {})[r[i] + " " + r[k].split("(")[0][7:]] = r[v]
cols = list(next(iter(table.values())).keys())
print("metric | " + " | ".join(cols))
for name, vals in table.items():
    print(name.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", ""), "|", " | ".join(vals.get(c, "") for c in cols))
PY
