# Why the 256 × 128 fp32 tile issues on 70 % of cycles: stall reasons and the FMA pipe, for LiteNet's three
# wide fp32 products of fc1 (width 2048, batch 1024) and PyTorch's (cuBLAS) same three products.
S=bench/results/gpu-mixer-2026-12-04/session12
M=gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__warps_active.avg.per_cycle_active,launch__registers_per_thread,launch__grid_size,launch__block_size
for s in long_scoreboard barrier wait mio_throttle lg_throttle short_scoreboard math_pipe_throttle dispatch_stall no_instruction selected not_selected branch_resolving; do M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
timeout 200 ncu --clock-control none --profile-from-start off -k regex:"linear_(gelu_forward|backward_input|backward_weight)_wide$" -c 3 --metrics $M --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py 2048 1024 fp32 > $OUT/ncu-stalls-litenet.csv 2>/dev/null
timeout 200 ncu --clock-control none --profile-from-start off --metrics $M --csv python3 $S/torch_mm.py > $OUT/ncu-stalls-torch.csv 2>/dev/null
python3 - $OUT/ncu-stalls-litenet.csv $OUT/ncu-stalls-torch.csv <<'PY'
import csv, sys
for path in sys.argv[1:]:
    rows = [r for r in csv.reader(open(path)) if len(r) > 14 and r[0] != "ID"]
    kernels = []
    vals = {}
    for r in rows:
        key = (r[0], r[4][:60])
        if key not in kernels: kernels.append(key)
        vals[(key, r[12])] = r[14]
    names = sorted({r[12] for r in rows})
    print("metric | " + " | ".join(k[1] for k in kernels))
    for n in names:
        short = n.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
        print(short, "|", " | ".join(vals.get((k, n), "") for k in kernels))
PY
