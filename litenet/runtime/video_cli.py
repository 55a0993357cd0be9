"""`litenet-infer --video SOURCE`'s command line: checks the extra, opens the source, the model and
the backend, runs the pipeline (video.py) and prints frames, problems and the summary."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_SOME_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def run_video(args: argparse.Namespace, log) -> int:
    """Classify the frames of args.video; returns the exit status (cli.py's module docstring)."""
    from litenet.errors import LiteNetError
    from litenet.runtime.backends import choose
    from litenet.runtime.locate import locate_model
    from litenet.runtime.video import Pipeline, VideoOptions
    from litenet.runtime.video_source import FrameReader, VideoError, import_cv2, open_capture, parse_source

    prog = "litenet-infer"
    cv2 = import_cv2()  # first: without the extra, nothing else is worth doing
    cv2.setNumThreads(args.video_threads)
    options = VideoOptions(every=args.every, batch_size=args.batch_size or VideoOptions.batch_size,
                           max_latency_ms=args.max_latency, realtime=args.realtime, predecode=args.predecode,
                           max_frames=args.max_frames, threads=args.video_threads, reconnects=args.reconnects,
                           out=args.out, topk=args.topk)
    if options.max_latency_ms == 0:
        options = VideoOptions(**{**options.__dict__, "batch_size": 1})
    emit, warn = _printers(prog, args.video, args.json)
    try:
        spec = parse_source(args.video)
        capture = open_capture(spec, options.threads)
    except VideoError as exc:
        warn(str(exc))
        return EXIT_SOME_FAILED
    try:
        model = locate_model(args.model, prog)
        precision = args.precision or model.default_precision()
        if precision not in model.precisions():
            raise LiteNetError(f"{model.describe()} has no {precision} model; run `litenet export --int8` for it "
                               f"or choose --precision {model.default_precision()}")
        choice = choose(args.backend, model, precision)
        for name, reason in choice.notes:
            log(f"backend {name}: " + ("chosen" if reason is None else f"not used ({reason})"))
        # One intra-op thread unless asked: the decoder needs the other cores more than a 32 × 32 forward does.
        backend = choice.cls(model, precision, threads=args.threads or 1, max_batch=options.batch_size)
        log(backend.describe())
        reader = FrameReader(spec, capture, warn, reconnects=options.reconnects)
        pipeline = Pipeline(backend, precision, model.describe(), spec, reader, options, emit, warn, cv2)
    except BaseException:
        capture.close()
        raise
    try:
        summary = pipeline.run()
    except VideoError as exc:  # --out cannot be written, --predecode does not fit
        warn(str(exc))
        return EXIT_SOME_FAILED
    if summary["interrupted"]:
        return EXIT_INTERRUPTED
    troubled = summary["failed"] or summary["drops"] or summary["ended_early"]
    return EXIT_SOME_FAILED if troubled else EXIT_OK


def _printers(prog: str, source: str, as_json: bool):
    """emit(record) for frames and the summary, warn(line) for problems: JSON Lines or human lines on
    stdout; problems and the human summary also on stderr."""
    from litenet.runtime import video_records as vr

    def emit(record: dict) -> None:
        if record["type"] == "summary":
            for line in vr.summary_lines(record):
                print(f"{prog}: {line}", file=sys.stderr, flush=True)
            if as_json:
                print(vr.to_json(record), flush=True)
            return
        print(vr.to_json(record) if as_json else vr.frame_line(record), flush=True)  # a pipe reads frames live

    def warn(line: str) -> None:
        print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
        if as_json:
            print(vr.to_json(vr.error_record(source, line)), flush=True)

    return emit, warn
