# Two k steps in flight in the BF16 wide tiles' registers (wide_tile DEPTH 2) against one (the depth-1 gemm_wide.cuh
# overlaid), LiteNet alone; then every GPU test on the depth-2 tree.
R=$OUT
WIDTHS="1024 2048" MODEL=mlp DIR=$R/variants bash bench/kernel_variants.sh "depth2|-|" "depth1|overlay:tmp-variant-depth1|" 2>&1 | grep "LiteNet" | cut -c1-110
timeout 250 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -2 $R/gpu-tests.log
