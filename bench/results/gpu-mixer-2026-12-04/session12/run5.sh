# The fp32 tile's k loop without guards (plain()), four ways: "async" (the tree: steps copied by cp.async,
# and each step's last k multiplied after the barrier, covering the first reads' latency), "async-noheld"
# (cp.async only), "held" (registers, last k held) and "plain" (registers only). Then all GPU tests on the tree.
MODEL=mlp WIDTHS="1024 2048" DIR=$OUT/variants bash bench/kernel_variants.sh "async|-|" \
    "async-noheld|overlay:.variants/async-noheld|" "held|overlay:.variants/held|" "plain|overlay:.variants/plain|" \
    2>&1 | grep "fp32" | sed 's/, PyTorch graph error ms//'
python3 -m pytest -q -m gpu tests > $OUT/gpu-tests.log 2>&1; tail -3 $OUT/gpu-tests.log
