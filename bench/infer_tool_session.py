"""The figures of `litenet bench-infer` and `litenet-infer --video` on one machine, in one command
(`make bench-infer-tool` here; bench/infer_tool_session.sh on a GPU machine): each step runs the
command a user types, as a subprocess, and keeps its raw output under --raw; the page is rendered
from those files by bench/infer_tool_report.py.

Steps: a test clip (bench/video_clip.py: 640 × 480, 30 fps, CIFAR-10 test images where found);
`litenet bench-infer MODEL --json`; bench-infer's overhead against a hand-timed loop
(bench/bench_infer_overhead.py); `--video` int8 on every video backend here — as fast as it goes on
one core, paced at the clip's 30 fps (ONNX Runtime), and on pre-decoded frames in batches of 256;
`--video --out` for an annotated clip, one frame of which is kept as a PNG.

    python bench/infer_tool_session.py --raw bench/results/new/infer-bench-cpu --page bench/results/new/infer-bench-cpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(cmd: list[str], log, stdout=None, timeout: float = 600) -> tuple[str, str]:
    """Run a command from the repository root with the checkout importable; (stdout, stderr). Fails loudly."""
    shown = " ".join(shlex.quote(c) for c in cmd)
    log(f"$ {shown}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"infer_tool_session: `{shown}` failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout, proc.stderr


def video_backends(model: str) -> list[str]:
    """The backends that run `model`'s int8 here, of LiteNet CUDA and ONNX Runtime (in that order)."""
    from litenet.runtime.backends import availability
    from litenet.runtime.model_files import ModelFiles

    files = ModelFiles.locate(model)
    return [name for name in ("cuda", "onnxruntime") if availability(name, files, "int8")[0] is not None]


def video_runs(clip: Path, model: str, backends: list[str], threads: int, predecode_frames: int) -> dict[str, list[str]]:
    """name → the litenet-infer arguments of each --video run."""
    base = ["-m", "litenet.runtime", "--video", str(clip), "--model", model, "--precision", "int8", "--json"]
    runs = {}
    for backend in backends:
        runs[f"stream-{backend}"] = [*base, "--backend", backend]
        # whole batches of 256 only, so every batch is one the warm-up has prepared
        runs[f"predecoded-{backend}"] = [*base, "--backend", backend, "--predecode", "--batch-size", "256",
                                         "--max-frames", str(predecode_frames), "--video-threads", str(threads)]
    if "onnxruntime" in backends:
        # 10 s paced as a camera delivers them, whatever the clip's length
        runs["realtime-onnxruntime"] = [*base, "--backend", "onnxruntime", "--realtime", "--max-latency", "0",
                                        "--max-frames", "300"]
    return runs


def accuracy(frames: list[dict], labels: dict[str, str]) -> dict | None:
    """The share of frames whose class is the CIFAR-10 label of the image they show (None without labels)."""
    if not labels:
        return None
    right = sum(r["class"] == labels[str(r["frame"])] for r in frames)
    return {"frames": len(frames), "right": right, "accuracy": right / len(frames) if frames else 0.0}


def annotated_frame(video: Path, png: Path, index: int) -> None:
    from litenet.runtime.video_source import import_cv2

    cv2 = import_cv2()
    cap = cv2.VideoCapture(str(video))
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, frame = cap.read()
    if not ok:
        raise SystemExit(f"infer_tool_session: {video} has no frame {index}")
    cv2.imwrite(str(png), frame)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True, help="folder for the raw outputs (JSON, the table, the PNG)")
    ap.add_argument("--page", help="render the Markdown page here (bench/infer_tool_report.py)")
    ap.add_argument("--model", default="models/litenet-base")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the test clip (default 10 s)")
    ap.add_argument("--video-threads", type=int, default=min(8, os.cpu_count() or 1),
                    help="--video-threads of the pre-decoded runs (default: the CPUs, at most 8)")
    ap.add_argument("--predecode-frames", type=int, default=256,
                    help="frames the pre-decoded runs hold in memory (a multiple of 256; default 256: 236 MB)")
    ap.add_argument("--loops", type=int, default=100, help="bench-infer --loops")
    args = ap.parse_args()
    raw = Path(args.raw)
    raw.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    notes: list[str] = []
    log = lambda line: (print(line, file=sys.stderr, flush=True), notes.append(line))  # noqa: E731
    started = time.time()
    load_before = os.getloadavg()

    work = Path(tempfile.mkdtemp(prefix="litenet-infer-tool-"))
    clip, labels_file = work / "clip.mp4", work / "clip.labels.json"
    run([py, "bench/video_clip.py", str(clip), "--seconds", str(args.seconds), "--fps", "30", "--labels",
         str(labels_file)], log)
    labels = json.loads(labels_file.read_text())["labels"]

    out, _ = run([py, "-m", "litenet", "bench-infer", args.model, "--loops", str(args.loops), "--json", "--quiet"], log)
    report = json.loads(out)
    (raw / "bench-infer.json").write_text(json.dumps(report, indent=1))
    from litenet.runtime.bench import render

    (raw / "bench-infer.txt").write_text(render(report))

    run([py, "bench/bench_infer_overhead.py", "--model", args.model, "--out", str(raw / "overhead.json")], log)

    videos = {}
    for name, argv in video_runs(clip, args.model, video_backends(args.model), args.video_threads,
                                 args.predecode_frames).items():
        out, _ = run([py, *argv], log)
        rows = [json.loads(line) for line in out.splitlines()]
        frames = [r for r in rows if r["type"] == "frame"]
        videos[name] = {"command": "litenet-infer " + " ".join(shlex.quote(a) for a in argv[2:]),
                        "summary": rows[-1], "accuracy": accuracy(frames, labels)}
    annotated = work / "annotated.mp4"
    out_argv = ["-m", "litenet.runtime", "--video", str(clip), "--model", args.model, "--precision", "int8",
                "--out", str(annotated)]
    run([py, *out_argv], log)
    annotated_frame(annotated, raw / "annotated-frame.png", index=min(45, round(args.seconds * 30) - 1))
    videos["annotated"] = {"command": "litenet-infer " + " ".join(shlex.quote(a) for a in out_argv[2:])}
    session = {"clip": {"seconds": args.seconds, "fps": 30, "size": [640, 480],
                        "images": "CIFAR-10 test" if labels else "random (no CIFAR-10 found)",
                        "command": f"python bench/video_clip.py clip.mp4 --seconds {args.seconds:g} --fps 30"},
               "videos": videos, "load_before": load_before, "load_after": os.getloadavg(),
               "seconds": time.time() - started, "model": args.model, "log": notes}
    (raw / "video.json").write_text(json.dumps(session, indent=1))
    if args.page:
        run([py, "bench/infer_tool_report.py", str(raw), "--out", args.page], log)


if __name__ == "__main__":
    main()
