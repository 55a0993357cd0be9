#!/usr/bin/env bash
# Variants of the kernels or plans timed side by side on one GPU, in one call: each VARIANT is
# NAME|FILES|SED — a copy of this tree with `sed -i -E SED` applied to FILES (comma-separated), or
# with FILES = overlay:PATH the files under PATH written over the copy (PATH shaped like this tree,
# e.g. `git archive REV kernels | tar -x -C PATH`: the kernels as they were at REV) — then the
# Mixer's BF16 step timed whole (bench_mixer_gpu.py steps, CUDA graph); the first variant also
# launch by launch (mixer_kernel_times.py; KERNEL_TIMES=0: not). MODEL=mlp times LiteNet's steps of
# litenet-base's shape at WIDTHS (default 1024 2048) instead, in PRECISIONS (default fp32 tf32 bf16;
# bench_steps_gpu.py --litenet-only). "base|-|" times the tree as it is. Results: DIR/NAME-*.
#
#   DIR=$OUT bench/kernel_variants.sh "base|-|" \
#       "depth2|kernels/linear.cu,kernels/token_linear.cu|s/gemm_splitk<(TM|4), 1, P>/gemm_splitk<\1, 2, P>/"
set -u
DIR=${DIR:-/tmp/kernel-variants}
BATCHES=${BATCHES:-256 1024}
MODEL=${MODEL:-mixer}
WIDTHS=${WIDTHS:-1024 2048}
PRECISIONS=${PRECISIONS:-fp32 tf32 bf16}
mkdir -p "$DIR"
top=$(pwd)
for spec in "$@"; do
    IFS='|' read -r name files expr <<<"$spec"
    copy=/tmp/variant-$name
    rm -rf "$copy" && mkdir -p "$copy" && tar --exclude=./.device-data -cf - . | tar -C "$copy" -xf -
    if [ "${files#overlay:}" != "$files" ]; then
        cp -r "${files#overlay:}/." "$copy/"
    elif [ "$files" != "-" ]; then
        for f in ${files//,/ }; do sed -i -E "$expr" "$copy/$f"; done
        (cd "$copy" && for f in ${files//,/ }; do diff -q "$top/$f" "$f" >/dev/null && echo "$name: $f unchanged"; done)
    fi
    if [ "$MODEL" = mlp ]; then
        (cd "$copy" && PYTHONPATH=. python3 bench/bench_steps_gpu.py --no-mixer --litenet-only --widths $WIDTHS \
            --precisions $PRECISIONS --batches $BATCHES --steps 12 --repeats 3 --out "$DIR/$name-mlp.md" 2>&1 | grep "LiteNet" | sed "s/^/$name  /")
        continue
    fi
    (cd "$copy" && export PYTHONPATH=. &&
        python3 bench/bench_mixer_gpu.py steps --batches $BATCHES --contenders litenet:bf16 --out "$DIR/$name-steps.json" \
            2>&1 | grep "ms/step" | sed "s/^/$name  /" &&
        if [ "$spec" = "$1" ] && [ "${KERNEL_TIMES:-1}" = 1 ]; then  # where the time goes: the first variant's launches
            python3 bench/mixer_kernel_times.py --batch $BATCHES --precision bf16 --out "$DIR/$name-kernels.json" \
                >"$DIR/$name-kernels.log" 2>&1
            grep "summed" "$DIR/$name-kernels.log" | sed "s/^/$name  /"
        fi)
done
