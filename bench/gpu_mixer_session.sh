#!/usr/bin/env bash
# One GPU session for the Mixer in one command: the GPU tests (the Mixer's first, then the MLP's and
# the inference kernels'), then the per-step benchmark against PyTorch, each stage under its own time
# limit so a slow one cannot starve the rest. Logs and JSON go to OUT; a short summary is printed.
#
#   OUT=/tmp/gpu bench/gpu_mixer_session.sh            STEPS=0: skip the benchmark, TESTS=0: the tests
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
    timeout "${MIXER_TESTS_S:-240}" python3 -m pytest -q -m gpu tests/cuda/test_mixer_gpu.py -rs >"$OUT/tests-mixer.log" 2>&1
    stamp "Mixer GPU tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests-mixer.log" | tail -4 | tr '\n' ' ')"
    timeout "${TESTS_S:-200}" python3 -m pytest -q -m gpu tests/cuda tests/runtime_cuda --deselect tests/cuda/test_mixer_gpu.py \
        -rs >"$OUT/tests.log" 2>&1
    stamp "other GPU tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests.log" | tail -4 | tr '\n' ' ')"
fi
if [ "${STEPS:-1}" != 0 ]; then
    timeout "${STEPS_S:-240}" python3 bench/bench_mixer_gpu.py steps --out "$OUT/steps.json" ${STEPS_ARGS:-} \
        >"$OUT/steps.log" 2>&1
    stamp "steps (rc $?):"
    grep -E '^batch' "$OUT/steps.log" || tail -15 "$OUT/steps.log"
fi
