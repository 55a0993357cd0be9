# The fp32 wide tile with each step's last k multiplied after the barrier ("held", the tree) against
# HEAD 19cc2b3's kernels ("base", an overlay); then where width 1024 / batch 1024's fp32 step goes:
# LiteNet's kernels one by one under ncu, PyTorch's eager step under torch.profiler; then ncu's stall
# reasons for the held tree's three fc1 products at width 2048 / batch 1024 (as session12/run3.sh).
P=bench/results/gpu-mixer-2026-12-04/profile
S=bench/results/gpu-mixer-2026-12-04/session12
MODEL=mlp WIDTHS="1024 2048" BATCHES=1024 PRECISIONS=fp32 DIR=$OUT/variants bash bench/kernel_variants.sh \
    "base|overlay:.variants/base|" "held|-|" "base2|overlay:.variants/base|" "held2|-|" 2>&1 | grep "fp32\|unchanged"
timeout 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
    python3 $P/ncu_step.py 1024 1024 fp32 > $OUT/ncu-1024-1024-fp32.csv 2>$OUT/ncu-1024-1024-fp32.log
python3 $P/torch_step_profile.py 1024 1024 fp32 > $OUT/torchprof-1024-1024-fp32.txt 2>&1
M=gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__registers_per_thread
for s in long_scoreboard barrier wait mio_throttle short_scoreboard math_pipe_throttle dispatch_stall no_instruction selected not_selected branch_resolving; do M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
timeout 150 ncu --clock-control none --profile-from-start off -k regex:"linear_(gelu_forward|backward_input|backward_weight)_wide$" -c 3 --metrics $M --csv python3 $P/ncu_step.py 2048 1024 fp32 > $OUT/ncu-stalls-held.csv 2>/dev/null
python3 - $OUT/ncu-1024-1024-fp32.csv $OUT/ncu-stalls-held.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0] != "ID"]
total = collections.Counter(); n = collections.Counter()
for r in rows:
    if r[12] == "gpu__time_duration.sum":
        total[r[4][:50]] += float(r[14].replace(",", "")) / 1000; n[r[4][:50]] += 1
print("LiteNet 1024/1024 fp32 kernels (µs):", round(sum(total.values()), 1))
for k, v in total.most_common(): print(f"  {v:8.1f}  x{n[k]}  {k}")
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 14 and r[0] != "ID"]
for r in rows: print(r[0], r[4][:28], r[12].replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", ""), r[14])
PY
grep -E "sgemm|gemm|Self CUDA time total" $OUT/torchprof-1024-1024-fp32.txt | cut -c1-90,180-260
