# The BF16 tiles' plain-load path: the MLP step table at widths 1024 and 2048, and width 2048 / batch 1024's launches.
R=$OUT
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --no-mixer --widths 1024 2048 --out $R/steps.md > $R/steps.log 2>&1
grep "BF16\|fp32" $R/steps.md | cut -d'|' -f2-8
timeout 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,sm__inst_issued.sum --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py 2048 1024 bf16 > $R/ncu-2048.csv 2> /dev/null
python3 bench/results/gpu-mixer-2026-12-04/session11/ncu_sum.py $R/ncu-2048.csv
