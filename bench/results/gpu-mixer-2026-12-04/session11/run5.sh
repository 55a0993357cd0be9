# The committed tree: the whole step table, and the BF16 steps at width 2048 and 1024 (batch 1024) launch by launch.
R=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out $R/steps.md > $R/steps.log 2>&1
grep "BF16\|fp32" $R/steps.md | cut -d'|' -f2-8
for W in 2048 1024; do
timeout 120 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,sm__inst_issued.sum --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py $W 1024 bf16 > $R/ncu-$W.csv 2> /dev/null
python3 bench/results/gpu-mixer-2026-12-04/session11/ncu_sum.py $R/ncu-$W.csv | head -12
done
