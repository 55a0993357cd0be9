"""`litenet-infer IMAGE...` or `litenet-infer --video SOURCE`: classify images, or the frames of a
video file, stream or camera, with the best backend this machine has (docs/runtime.md).

Exit status: 0 every image (frame) classified; 1 at least one input could not be read (the others
were still classified; for a video: the source cannot be opened, a frame did not decode, the stream
dropped); 2 bad command line; 3 nothing classified because the model files are unusable; 4 the machine refused (permission
denied, a full disk, a backend asked for by name that cannot run here, the video extra missing); 130 interrupted
(a video run still prints its summary). docs/errors.md lists them for every command.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from litenet.errors import (EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, LiteNetError,
                            debugging, one_line, report)

EXIT_MODEL = EXIT_INPUT
PROG = "litenet-infer"


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    from litenet.runtime.backends import BACKENDS

    p = argparse.ArgumentParser(prog=PROG, description="Classify images with a LiteNet model (CIFAR-10 classes).",
                                epilog="Exit status: 0 all classified, 1 some inputs failed, 2 bad usage, "
                                       "3 model or backend unusable, 4 permission denied or disk full. Schema of --json: docs/runtime.md.")
    p.add_argument("images", nargs="*", metavar="IMAGE", help="image files, folders (their images) or glob patterns")
    p.add_argument("--model", metavar="DIR|FILE",
                   help="model folder (litenet train + export) or one model file (default: your newest finished and "
                        "exported run under runs/, else the best shipped model; the one used is named on stderr)")
    p.add_argument("--backend", default="auto", choices=["auto", *BACKENDS],
                   help="auto: TensorRT engine → LiteNet CUDA → ONNX Runtime CPU, the first usable (default)")
    p.add_argument("--precision", choices=["fp32", "int8"],
                   help="fp32 (default) or int8; a single int8 model file implies int8")
    p.add_argument("--topk", type=int, default=1, metavar="K", help="show the K best classes (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object per image (schema litenet-infer/1)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="images per forward pass (default 64); with --video the most frames a batch holds (default 16)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="ONNX Runtime intra-op threads (default: 1 for batches ≤ 8, else the physical cores; "
                        "with --video 1)")
    p.add_argument("--verbose", action="store_true", help="say which backend was chosen and why, and the timings")
    add_video_arguments(p)
    return p


def add_video_arguments(p: argparse.ArgumentParser) -> None:
    """The --video flags (the video extra, VIDEO_EXTRA)."""
    from litenet.runtime.video import VideoOptions
    from litenet.runtime.video_source import VIDEO_EXTRA

    d = VideoOptions()
    g = p.add_argument_group("video", "classify a video instead of images (needs the video extra: "
                                      f"{VIDEO_EXTRA}); schema of --json: litenet-video/1")
    g.add_argument("--video", metavar="SOURCE",
                   help="a video file, a stream URL (rtsp://, http://), a camera index (0) or picamera2[:N] on a Pi")
    g.add_argument("--every", type=int, default=d.every, metavar="N", help="classify every Nth frame (default 1)")
    g.add_argument("--out", metavar="FILE.mp4", help="write the frames with the label and score drawn on them")
    g.add_argument("--max-latency", type=float, default=d.max_latency_ms, metavar="MS",
                   help="send a batch before its first frame has waited this long (default %(default)g; 0: batch 1)")
    g.add_argument("--realtime", action="store_true", help="pace a file at its frame rate, as a camera delivers it")
    g.add_argument("--predecode", action="store_true",
                   help="decode the whole clip first, then time the classification of frames in memory")
    g.add_argument("--max-frames", type=int, metavar="N", help="stop after N frames")
    g.add_argument("--video-threads", type=int, default=d.threads, metavar="N",
                   help="threads that decode and resize frames (default 1: the whole pipeline on one core)")
    g.add_argument("--reconnects", type=int, default=d.reconnects, metavar="N",
                   help="reopen a dropped stream or camera up to N times (default %(default)s)")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (run as a program, with argv None, it exits)."""
    code = _main(argv)
    if argv is None:
        # NOTE: a program's end skips Python's finalization: tearing down NumPy's, ONNX Runtime's
        # and Pillow's modules costs ~0.1 s of CPU, a fifth of the start-up budget, and frees
        # nothing the OS would not. Output is flushed first; no file is open for writing.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            code = code or EXIT_SOME_FAILED
        except OSError as exc:  # stdout on a full disk: the records did not all reach it
            code = report(PROG, exc)
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    # NumPy does no matrix work here (ONNX Runtime or the GPU does), and an idle OpenBLAS pool
    # costs ~0.1 s of CPU to start and stop: a fifth of this command's start-up budget.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = usage_problem(args)
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    log = (lambda line: print(f"{PROG}: {line}", file=sys.stderr)) if args.verbose else (lambda line: None)
    try:
        if args.video is not None:
            from litenet.runtime.video_cli import run_video
            return run_video(args, log)
        return run(args, log)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `litenet-infer ... | head`: the reader is gone, nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_SOME_FAILED
    except (LiteNetError, OSError) as exc:  # a bad model, or the machine refusing (a full disk on stdout)
        if debugging():
            raise
        return report(PROG, exc)


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line beyond what argparse checks, or None."""
    if args.video is None and not args.images:
        return "give at least one IMAGE, or --video SOURCE"
    if args.video is not None and args.images:
        return "give images or --video SOURCE, not both"
    counts = {"--topk": args.topk, "--batch-size": args.batch_size, "--threads": args.threads, "--every": args.every,
              "--max-frames": args.max_frames, "--video-threads": args.video_threads}
    low = [name for name, value in counts.items() if value is not None and value < 1]
    if low:
        return f"{', '.join(low)} must be at least 1"
    from litenet.limits import MAX_INFER_BATCH, MAX_THREADS

    many = [f"{name} {value}" for name, value in (("--threads", args.threads), ("--video-threads", args.video_threads))
            if value is not None and value > MAX_THREADS]
    if many:
        return f"{', '.join(many)}: at most {MAX_THREADS} threads (more than the cores only slows down)"
    if args.batch_size is not None and args.batch_size > MAX_INFER_BATCH:
        return f"--batch-size {args.batch_size}: at most {MAX_INFER_BATCH} images a forward pass"
    if not 0 <= args.max_latency <= 60_000 or args.reconnects < 0:  # NaN fails the first too
        return "--max-latency must be 0 … 60000 ms and --reconnects at least 0"
    if args.video is None:
        given = [f for f, v in (("--out", args.out), ("--realtime", args.realtime), ("--predecode", args.predecode),
                                ("--max-frames", args.max_frames)) if v]
        if given:
            return f"{', '.join(given)} only go with --video"
    elif args.realtime and args.predecode:
        return "--realtime paces decoding and --predecode decodes first: choose one"
    return None


def run(args: argparse.Namespace, log) -> int:
    """Locate the model, choose and open the backend, classify every input in batches, print the records."""
    from litenet.runtime.backends import choose
    from litenet.runtime.images import expand_inputs
    from litenet.runtime.locate import locate_model
    from litenet.runtime.model_files import ModelFiles

    t0 = time.perf_counter()
    args.batch_size = args.batch_size or 64
    inputs = expand_inputs(args.images)
    model = locate_model(args.model, PROG)
    precision = args.precision or model.default_precision()
    if precision not in model.precisions():
        raise LiteNetError(f"{model.describe()} has no {precision} model; run `litenet export --int8` for it "
                           f"or choose --precision {model.default_precision()}")
    log(f"model {model.describe()} ({precision})")
    choice = choose(args.backend, model, precision)
    for name, reason in choice.notes:
        log(f"backend {name}: " + ("chosen" if reason is None else f"not used ({reason})"))
    readable = sum(reason is None for _, reason in inputs)
    backend = choice.cls(model, precision, threads=args.threads,
                         max_batch=max(1, min(args.batch_size, readable)))
    log(f"{backend.describe()}; ready in {1000 * (time.perf_counter() - t0):.0f} ms")
    emit = _emitter(args.json)
    failed = 0
    for start in range(0, len(inputs), args.batch_size):
        failed += classify_batch(inputs[start:start + args.batch_size], backend, precision, model, args, emit)
    log(f"{len(inputs) - failed} classified, {failed} failed, {1000 * (time.perf_counter() - t0):.0f} ms in all")
    sys.stdout.flush()
    return EXIT_SOME_FAILED if failed else EXIT_OK


def classify_batch(batch, backend, precision: str, model, args, emit) -> int:
    """Decode one batch of inputs, run the good ones in one predict call, emit records in input order; returns failures."""
    import numpy as np

    from litenet.runtime import records
    from litenet.runtime.images import ImageError, load_image

    results: list[dict | None] = []
    pixels, rows = [], []
    for path, problem in batch:
        try:
            if problem is not None:
                raise ImageError(f"{path}: {problem}")
            pixels.append(load_image(path))
            rows.append(len(results))
            results.append(None)
        except ImageError as exc:
            results.append(records.error_record(path, str(exc)))
    if pixels:
        start = time.perf_counter()
        logits = np.asarray(backend.predict(np.stack(pixels)), dtype=np.float32)
        per_image_ms = 1000 * (time.perf_counter() - start) / len(pixels)
        for row, z in zip(rows, logits):
            path = batch[row][0]
            if not np.all(np.isfinite(z)):
                results[row] = records.error_record(path, f"{path}: the model produced NaN or infinite logits")
                continue
            results[row] = records.ok_record(path, z, backend.classes, args.topk, backend.name, precision,
                                             model.describe(), len(pixels), per_image_ms)
    for record in results:
        emit(record)
    return sum(not r["ok"] for r in results)


def _emitter(as_json: bool):
    """Prints a record: a JSON line or a human line on stdout; failures also as one line on stderr."""
    from litenet.runtime import records

    def emit(record: dict) -> None:
        if not record["ok"]:
            print(f"{PROG}: error: {one_line(record['error'])}", file=sys.stderr)
            if as_json:
                print(records.to_json(record))
            return
        print(records.to_json(record) if as_json else records.to_human(record))

    return emit


if __name__ == "__main__":
    sys.exit(main())
