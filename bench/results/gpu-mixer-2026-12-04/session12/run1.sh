# The fp32 wide tile at 256 × 128 (16 × 8 outputs a thread, k steps of 8, one block a multiprocessor,
# splits by whole waves) against the 128 × 128 one (HEAD 48dd460's kernels and geometry as an overlay):
# LiteNet's steps of litenet-base's shape, then the MLP rows against PyTorch, then the wide GPU tests.
set -x
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
MODEL=mlp WIDTHS="1024 2048" DIR=$OUT/variants bash bench/kernel_variants.sh "new|-|" "old|overlay:.variants/old|"
python3 bench/bench_steps_gpu.py --steps 12 --repeats 3 --no-mixer --widths 1024 2048 --out $OUT/steps.md > $OUT/steps.log 2>&1
grep "fp32\|BF16" $OUT/steps.md | cut -d'|' -f2-8
python3 -m pytest -q -m gpu tests/cuda -k "wide or geometry" 2>&1 | tail -3
