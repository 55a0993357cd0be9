#!/usr/bin/env bash
# `litenet bench-infer` and `litenet-infer --video` on a GPU machine in one command, with the machine's
# own python3 (CuPy, ONNX Runtime and OpenCV there; nothing installed): the GPU tests of both commands
# (tests/runtime_cuda/test_video_bench_gpu.py), then bench/infer_tool_session.py — the bench-infer
# table with LiteNet's CUDA rows, --video on a 60 s 640 × 480 clip through LiteNet's CUDA int8 path and
# ONNX Runtime, 1,024 pre-decoded frames in batches of 256 (decode timed apart), an annotated frame.
# From the repository root; at most 7 files land in OUT (the page, its raw folder, the logs):
#
#   OUT=/tmp/infer-tool bench/infer_tool_session.sh
#   then fold $OUT/infer-bench-gpu.md into bench/results/infer-tool.md and its raw files into raw/infer-tool.tar.xz
set -u
OUT=${OUT:-/tmp/litenet-infer-tool}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
python3 -c 'import cv2, cupy, onnxruntime; print("opencv", cv2.__version__, "cupy", cupy.__version__, "ort", onnxruntime.__version__)' \
    || { echo "infer_tool_session: needs OpenCV, CuPy and ONNX Runtime importable by python3" >&2; exit 1; }
timeout "${TESTS_S:-240}" python3 -m pytest -q -m gpu tests/runtime_cuda/test_video_bench_gpu.py -rs >"$OUT/tests.log" 2>&1
echo "tests (rc $?): $(tail -1 "$OUT/tests.log")"
timeout "${SESSION_S:-330}" python3 bench/infer_tool_session.py --raw "$OUT/infer-bench-gpu" --page "$OUT/infer-bench-gpu.md" \
    --seconds "${CLIP_S:-60}" --predecode-frames "${PREDECODE_FRAMES:-1024}" 2>"$OUT/session.log"
echo "session (rc $?)"
[ -f "$OUT/infer-bench-gpu.md" ] && sed -n '/^## Targets/,/^## `litenet bench-infer`/p' "$OUT/infer-bench-gpu.md" || tail -20 "$OUT/session.log"
