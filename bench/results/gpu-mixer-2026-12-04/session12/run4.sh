# The fp32 tile's k loop: a step an iteration (the tree) against the loop unrolled by two (the BF16 tiles'
# way), and the step's 8 k unrolled 4 or 2 instead of 8 (smaller loop bodies: ncu's no_instruction stall
# was 0.29 a issue against cuBLAS's 0.02). LiteNet's MLP steps, widths 1024 and 2048.
G=kernels/gemm_wide.cuh
MODEL=mlp WIDTHS="1024 2048" DIR=$OUT/variants bash bench/kernel_variants.sh "single|-|" \
    "unrolled|$G|s/if \(T::DEPTH == 1\) \{/if (false) {/" \
    "kk4|$G|s|#pragma unroll  // the step's k|#pragma unroll 4|" \
    "kk2|$G|s|#pragma unroll  // the step's k|#pragma unroll 2|" 2>&1 | grep "fp32\|unchanged"
