# The final tree (wide tiles from 2^29 multiply-adds, a split wide tile's counter indexed by tile):
# every GPU test, then the whole step table against PyTorch's CUDA-graph replay.
python3 -m pytest -q -m gpu tests > $OUT/gpu-tests.log 2>&1; tail -2 $OUT/gpu-tests.log
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out $OUT/steps-final3.md > $OUT/steps-final3.log 2>&1
grep "^| " $OUT/steps-final3.md | cut -d'|' -f2-11
