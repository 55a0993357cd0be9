#!/usr/bin/env bash
# One GPU session in one command, as bench/results/gpu-*.md reports it: the GPU tests, each launch's
# time for the cases given (bench/gpu_kernel_times.py), then LiteNet against PyTorch
# (bench/bench_gpu.py). Each stage has its own time limit, so a slow one cannot starve the rest;
# logs and numbers go to OUT (at most 7 files). Prints a short summary last.
#
#   OUT=/tmp/gpu bench/gpu_session.sh "litenet-seed 64 fused" "wide 4096 ops tall=no"
#   TESTS=0 BENCH_ARGS="--presets wide" bench/gpu_session.sh      # skip the tests, one preset
#   TOTAL_S=200 …                                                  # the bench gets what is left of 200 s
set -u
OUT=${OUT:-/tmp/litenet-gpu}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
python3 -c 'import cupy, torch; print("cupy", cupy.__version__, "torch", torch.__version__)' >>"$OUT/gpu.txt" 2>&1
stamp "$(cat "$OUT/gpu.txt" | tr '\n' ' ')"
if [ "${TESTS:-1}" != 0 ]; then
    timeout "${TESTS_S:-150}" python3 -m pytest -q -m gpu tests/cuda -x -rs ${TEST_ARGS:-} >"$OUT/tests.log" 2>&1
    stamp "tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests.log" | tail -3 | tr '\n' ' ')"
fi
if [ $# -gt 0 ]; then
    timeout "${TIMES_S:-90}" python3 bench/gpu_kernel_times.py --out "$OUT/kernel_times.json" "$@" >"$OUT/kernel_times.log" 2>&1
    stamp "kernel times (rc $?):"
    grep -E '^[a-z]' "$OUT/kernel_times.log"
fi
if [ "${BENCH:-1}" != 0 ]; then
    left=${BENCH_S:-150}
    [ -n "${TOTAL_S:-}" ] && left=$((TOTAL_S - $(date +%s) + start - 5))  # what the earlier stages left
    timeout "$left" python3 bench/bench_gpu.py --out "$OUT/bench.md" --repeats "${REPEATS:-11}" ${BENCH_ARGS:-} \
        >"$OUT/bench.log" 2>&1
    stamp "bench (rc $?):"
    grep -E '^# ceil' "$OUT/bench.log"
    [ -f "$OUT/bench.md" ] && cut -d'|' -f2-5,7,9,12 "$OUT/bench.md" || tail -5 "$OUT/bench.log"
fi
