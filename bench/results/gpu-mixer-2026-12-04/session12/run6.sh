# The final tree (fp32 wide tile 256 × 128, a step an iteration, plain loads checked each step): the MLP rows
# at widths 1024 and 2048 against PyTorch, then every GPU test.
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --no-mixer --widths 1024 2048 --out $OUT/steps-final.md > $OUT/steps-final.log 2>&1
grep "fp32\|BF16" $OUT/steps-final.md | cut -d'|' -f2-8
python3 -m pytest -q -m gpu tests > $OUT/gpu-tests.log 2>&1; tail -2 $OUT/gpu-tests.log
