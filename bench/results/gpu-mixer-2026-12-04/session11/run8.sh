# The tree as committed (the operands' copies written by their producers): every GPU test, the whole step table,
# width 1024 and 2048's BF16 step (batch 1024) launch by launch.
R=$OUT
python3 -m pytest -q -m gpu tests -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -2 $R/gpu-tests.log
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out $R/steps.md > $R/steps.log 2>&1
grep "BF16\|fp32" $R/steps.md | cut -d'|' -f2-8
for W in 1024 2048; do
timeout 100 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,sm__inst_issued.sum --csv python3 bench/results/gpu-mixer-2026-12-04/profile/ncu_step.py $W 1024 bf16 > $R/ncu-$W.csv 2> /dev/null
python3 bench/results/gpu-mixer-2026-12-04/session11/ncu_sum.py $R/ncu-$W.csv | tail -14
done
