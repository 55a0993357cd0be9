#!/usr/bin/env bash
# The Mixer's CUDA inference on a GPU in one command: its GPU tests (tests/runtime_cuda/
# test_rtcuda_mixer_gpu.py: fp32 vs the NumPy forward and ONNX Runtime, int8 vs the plan and the QDQ
# model, launch by launch, batches 1 to 4096, at litenet-mixer's and litenet-mixer-cpu's sizes), then
# the benchmark (bench/bench_infer_mixer_gpu.py: int8 vs fp32 batch-4096 throughput, batch-1 latency vs
# PyTorch eager, where the time goes). No data set needed. Each stage has its own time limit; logs, the
# tests' figures (JSON) and the benchmark's table go to OUT. Prints a short summary last. The two limits
# (330 s + 210 s) keep the whole session inside one 10-minute command.
#
#   OUT=/tmp/mixer-infer bench/gpu_infer_mixer_session.sh          # from the repository root
#   TESTS=0 bench/gpu_infer_mixer_session.sh                         # the benchmark alone
#   BENCH=0 TEST_ARGS="-k litenet-mixer-cpu" bench/gpu_infer_mixer_session.sh
set -u
OUT=${OUT:-/tmp/litenet-mixer-infer}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
python3 -c 'import cupy, torch, onnxruntime; print("cupy", cupy.__version__, "torch", torch.__version__, "ort", onnxruntime.__version__)' \
    >>"$OUT/gpu.txt" 2>&1
stamp "$(tr '\n' ' ' <"$OUT/gpu.txt")"
if [ "${TESTS:-1}" != 0 ]; then
    LITENET_RTCUDA_MIXER_REPORT="$OUT/tests.json" timeout "${TESTS_S:-330}" \
        python3 -m pytest -q -m gpu tests/runtime_cuda/test_rtcuda_mixer_gpu.py -rs ${TEST_ARGS:-} >"$OUT/tests.log" 2>&1
    stamp "tests (rc $?): $(grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/tests.log" | tail -4 | tr '\n' ' ')"
fi
if [ "${BENCH:-1}" != 0 ]; then
    timeout "${BENCH_S:-210}" python3 bench/bench_infer_mixer_gpu.py --out "$OUT/bench.md" ${BENCH_ARGS:-} \
        >"$OUT/bench.log" 2>&1
    stamp "bench (rc $?):"
    [ -f "$OUT/bench.md" ] && sed -n '1,20p' "$OUT/bench.md" || tail -20 "$OUT/bench.log"
fi
