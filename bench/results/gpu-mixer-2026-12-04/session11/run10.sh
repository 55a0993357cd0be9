# The final tree (two k steps in flight in the BF16 wide tiles): the MLP rows at widths 1024 and 2048 against PyTorch.
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --no-mixer --widths 1024 2048 --out $OUT/steps-final.md > $OUT/steps-final.log 2>&1
grep "BF16\|fp32" $OUT/steps-final.md | cut -d'|' -f2-8
