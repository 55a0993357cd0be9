# The tree (serpentine multiply-adds, last k held, one split-K arrival a wide tile) against "serp" (the
# same with the tall tile's fixup for each part: an arrival and a fence a part) and "early" (the
# tree with each step's first shared reads written before the held k's multiply-adds); fp32 and BF16,
# batches 256 and 1024, widths 1024 and 2048, LiteNet alone.
MODEL=mlp WIDTHS="1024 2048" BATCHES="256 1024" PRECISIONS="fp32 bf16" DIR=$OUT/variants bash bench/kernel_variants.sh \
    "tree|-|" "serp|overlay:.variants/serp|" "early|overlay:.variants/early|" "tree2|-|" 2>&1 | grep "B= " | sed 's/, PyTorch graph error ms//; s/litenet-base shape, //'
