# Wide tiles for smaller products now that a split wide tile arrives once: the tree (wide from 2^30
# multiply-adds) against "min29" (from 2^29: litenet-base's shape at width 1024 / batch 256 and width
# 256 / batch 1024 take them), fp32 and BF16, widths 256 and 1024, LiteNet alone.
MODEL=mlp WIDTHS="256 1024" BATCHES="256 1024" PRECISIONS="fp32 bf16" DIR=$OUT/variants bash bench/kernel_variants.sh \
    "tree|-|" "min29|litenet/train/cuda/geometry.py|s/^WIDE_MIN_WORK = 1 << 30/WIDE_MIN_WORK = 1 << 29/" \
    "tree2|-|" "min29b|litenet/train/cuda/geometry.py|s/^WIDE_MIN_WORK = 1 << 30/WIDE_MIN_WORK = 1 << 29/" \
    2>&1 | grep "B= \|unchanged" | sed 's/, PyTorch graph error ms//; s/litenet-base shape, //'
