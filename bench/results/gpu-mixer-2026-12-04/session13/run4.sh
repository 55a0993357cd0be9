# The final tree: every GPU test, then the whole step table (the Mixer and litenet-base's shape at
# widths 256, 1024 and 2048, batches 256 and 1024, fp32 and the faster tensor-core precision) against
# PyTorch's CUDA-graph replay.
python3 -m pytest -q -m gpu tests > $OUT/gpu-tests.log 2>&1; tail -2 $OUT/gpu-tests.log
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --out $OUT/steps-final.md > $OUT/steps-final.log 2>&1
grep "^| " $OUT/steps-final.md | cut -d'|' -f2-11
