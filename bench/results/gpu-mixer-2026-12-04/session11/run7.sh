# Splits with at least 256 (or 128) of K each instead of 64: the head's 10-column products spent most of their
# 15 µs in the last block reading 16 partial tiles. LiteNet alone, the MLP's and the Mixer's BF16 steps.
G=litenet/train/cuda/geometry.py
WIDTHS="256 1024 2048" MODEL=mlp DIR=$OUT/mlp bash bench/kernel_variants.sh "base|-|" "k128|$G|s#K // 64#K // 128#" "k256|$G|s#K // 64#K // 256#" 2>&1 | tail -12
KERNEL_TIMES=0 DIR=$OUT/mixer bash bench/kernel_variants.sh "base|-|" "k128|$G|s#K // 64#K // 128#" "k256|$G|s#K // 64#K // 256#" 2>&1 | tail -8
