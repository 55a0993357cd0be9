export PYTHONPATH=$PWD
git log --oneline | head -1
python3 -m pytest -q -m gpu tests > $OUT/gpu-tests.log 2>&1; tail -2 $OUT/gpu-tests.log
MODEL=mlp WIDTHS="1024 2048" BATCHES="256 1024" DIR=$OUT bash bench/kernel_variants.sh "base|-|" \
  "blocks1|kernels/gemm_wide.cuh|s/^#define LN_WIDE_BLOCKS_BF16 2 .*/#define LN_WIDE_BLOCKS_BF16 1/" \
  "share1|litenet/train/cuda/geometry.py|s/^WIDE_BLOCKS = \{\"fp32\": 2, \"bf16\": 1\}/WIDE_BLOCKS = {\"fp32\": 2, \"bf16\": 2}/" 2>&1 | tail -40
ls $OUT
