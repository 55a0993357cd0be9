#!/usr/bin/env bash
# One GPU session for the MLP's --precision and the per-step table, in one command (< 10 min on an
# H200): the MLP's tensor-core GPU tests, bench_steps_gpu.py, then the MLP's fp32 GPU tests (a guard:
# nothing changed there). Each stage runs under its own time limit so a slow one cannot starve the rest;
# logs, the table (Markdown) and its JSON go to OUT, and a short summary is printed.
#
#   OUT=/tmp/gpu bench/gpu_precision_session.sh        TESTS=0: skip the tests, STEPS=0: the table
set -u
OUT=${OUT:-/tmp/litenet-gpu}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
python3 -c 'import cupy, torch; print("cupy", cupy.__version__, "torch", torch.__version__)' >>"$OUT/gpu.txt" 2>&1
stamp "$(tr '\n' ' ' <"$OUT/gpu.txt")"
if [ "${TESTS:-1}" != 0 ]; then
    timeout "${PRECISION_TESTS_S:-150}" python3 -m pytest -q -m gpu tests/cuda/test_cuda_precision_gpu.py -rs -s \
        >"$OUT/tests-precision.log" 2>&1
    stamp "MLP precision GPU tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests-precision.log" | tail -4 | tr '\n' ' ')"
    grep -E 'worst error' "$OUT/tests-precision.log"
fi
if [ "${STEPS:-1}" != 0 ]; then
    timeout "${STEPS_S:-300}" python3 bench/bench_steps_gpu.py --out "$OUT/steps.md" ${STEPS_ARGS:-} >"$OUT/steps.log" 2>&1
    stamp "steps table (rc $?):"
    cat "$OUT/steps.md" 2>/dev/null || tail -30 "$OUT/steps.log"
fi
if [ "${TESTS:-1}" != 0 ]; then  # last: the fp32 MLP tests guard what did not change
    timeout "${TESTS_S:-120}" python3 -m pytest -q -m gpu tests/cuda/test_cuda_gpu.py -rs >"$OUT/tests-fp32.log" 2>&1
    stamp "MLP fp32 GPU tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests-fp32.log" | tail -4 | tr '\n' ' ')"
fi
