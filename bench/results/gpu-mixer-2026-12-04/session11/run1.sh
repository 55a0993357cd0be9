set -u
R=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --no-mixer --widths 1024 2048 --out $R/steps.md > $R/steps.log 2>&1
tail -25 $R/steps.md
timeout 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py 2048 1024 bf16 > $R/ncu-2048.csv 2> $R/ncu-2048.err
python3 - <<'PY'
import csv, os, collections
rows = [r for r in csv.reader(open(os.environ["OUT"] + "/ncu-2048.csv")) if len(r) > 10]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
tot = collections.Counter()
for r in rows[1:]:
    try: tot[r[k].split("(")[0]] += float(r[v].replace(",", "")) / 1000
    except ValueError: pass
for name, us in tot.most_common(): print(f"{us:9.1f} us  {name}")
print(f"{sum(tot.values()):9.1f} us  total")
PY
timeout 280 python3 -m pytest -q -m gpu tests/cuda -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -3 $R/gpu-tests.log
