# The final tree again: the whole step table a second time (run-to-run spread), then width 1024 / batch
# 1024's fp32 step kernel by kernel under ncu (as run1.sh), and the stall samples of its four-split
# ∂input product (as run2.sh).
P=bench/results/gpu-mixer-2026-12-04/profile
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out $OUT/steps-final2.md > $OUT/steps-final2.log 2>&1
grep "^| " $OUT/steps-final2.md | cut -d'|' -f2-9
timeout 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
    python3 $P/ncu_step.py 1024 1024 fp32 > $OUT/ncu-1024-1024-fp32.csv 2>$OUT/ncu-1024-1024-fp32.log
timeout 120 ncu --clock-control none --profile-from-start off -k regex:"linear_backward_input_wide\$" -s 3 -c 1 \
    --section SourceCounters --section WarpStateStats -o $OUT/src-backward_input-1024 \
    python3 $P/ncu_step.py 1024 1024 fp32 > /dev/null 2>&1
ncu -i $OUT/src-backward_input-1024.ncu-rep --page source --csv --print-source sass > $OUT/src-backward_input-1024.csv 2>&1
python3 - $OUT/ncu-1024-1024-fp32.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0] != "ID"]
total = collections.Counter(); n = collections.Counter()
for r in rows:
    if r[12] == "gpu__time_duration.sum":
        total[r[4][:50]] += float(r[14].replace(",", "")) / 1000; n[r[4][:50]] += 1
print("LiteNet 1024/1024 fp32 kernels (µs):", round(sum(total.values()), 1))
for k, v in total.most_common(8): print(f"  {v:8.1f}  x{n[k]}  {k}")
PY
