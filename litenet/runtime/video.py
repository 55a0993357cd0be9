"""`litenet-infer --video SOURCE`: classify the frames of a video file, a stream or a camera as they
come — decode → centre square → 32 × 32 → the backend — and say how fast each stage went.

Frames are classified in batches when that is faster (every backend's per-call cost is shared by
the batch) and latency allows: a batch is sent when it holds --batch-size frames or when waiting
for one more frame would keep its first frame past --max-latency. --realtime paces a file at its
frame rate, as a camera delivers it, to measure what real time costs; --predecode decodes the
whole clip first and then times the classification of frames already in memory (decode reported
on its own). Ctrl-C stops after the batch in hand, with the summary; --out is still finalised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from litenet.runtime import frames as framelib
from litenet.runtime import video_records as vr
from litenet.runtime.video_source import FrameReader, SourceSpec, VideoError

# FourCC per --out suffix (all written by the FFmpeg inside opencv-python-headless).
FOURCC = {".mp4": "mp4v", ".m4v": "mp4v", ".mov": "mp4v", ".avi": "MJPG", ".mkv": "mp4v"}


@dataclass(frozen=True)
class VideoOptions:
    """The --video flags of litenet-infer (cli.py documents each)."""

    every: int = 1
    batch_size: int = 16
    max_latency_ms: float = 100.0
    realtime: bool = False
    predecode: bool = False
    max_frames: int | None = None
    threads: int = 1
    reconnects: int = 3
    out: str | None = None
    topk: int = 1


class Stages:
    """Seconds spent in each stage and the frames each handled."""

    NAMES = ("decode", "resize", "inference", "output")

    def __init__(self):
        self.seconds = dict.fromkeys(self.NAMES, 0.0)
        self.frames = dict.fromkeys(self.NAMES, 0)
        self.batches = 0

    def add(self, name: str, seconds: float, frames: int) -> None:
        self.seconds[name] += seconds
        self.frames[name] += frames

    def report(self) -> dict:
        out = {}
        for name in self.NAMES:
            s, n = self.seconds[name], self.frames[name]
            out[name] = {"s": s, "frames": n, "ms_per_frame": 1e3 * s / n if n else 0.0, "fps": n / s if s > 0 else None}
        out["inference"].update(batches=self.batches, mean_batch=self.frames["inference"] / self.batches if self.batches else 0.0,
                                ms_per_batch=1e3 * self.seconds["inference"] / self.batches if self.batches else 0.0)
        return out


class Pipeline:
    """One run over one source: reads, batches, classifies, emits records, writes --out; then the summary."""

    def __init__(self, backend, precision: str, model: str, spec: SourceSpec, reader: FrameReader, options: VideoOptions,
                 emit, warn, cv2, clock=time.perf_counter):
        self.backend, self.precision, self.model, self.spec, self.reader = backend, precision, model, spec, reader
        self.o, self.emit, self.warn, self.cv2, self.clock = options, emit, warn, cv2, clock
        self.fps = reader.capture.fps()
        if options.realtime and (spec.live or not self.fps):
            raise VideoError(f"{spec.text}: --realtime paces a file by its frame rate; "
                             + ("a live source keeps its own pace" if spec.live else "this file states none"))
        self.stages = Stages()
        self.stop = False  # set by the first Ctrl-C (run)
        self.classified = 0
        self.writer = None
        self.shape = None
        self.last_label = ""
        self.late, self.max_lag, self.end_lag = 0, 0.0, 0.0
        self.pool = None
        if options.threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(options.threads)

    # --- the two ways through a source ---------------------------------------------------------------

    def run(self) -> dict:
        """Classify the source to its end (or Ctrl-C); returns the summary (also emitted)."""
        self.warm_up()
        interrupted = False
        cpu0 = time.process_time()
        self.start = start = self.clock()
        restore = self._stop_on_ctrl_c()
        try:
            if self.o.predecode:
                decoded = self._decode_all()
                cpu0, start = time.process_time(), self.clock()  # the classification is timed on its own
                self._classify_decoded(decoded)
            else:
                self._stream(start)
        except KeyboardInterrupt:  # a second Ctrl-C, or one while a read blocks
            interrupted = True
        finally:
            restore()
            if self.writer is not None:
                self.writer.release()
            if self.pool is not None:
                self.pool.shutdown()
            self.reader.capture.close()
        return self.summary(self.clock() - start, time.process_time() - cpu0, interrupted or self.stop)

    def _stop_on_ctrl_c(self):
        """Make the first Ctrl-C a request, honoured between frames, so the frame in hand is classified,
        printed and written whole; a second one interrupts at once. Returns what undoes it."""
        import signal
        import threading

        self.stop = False
        previous = signal.getsignal(signal.SIGINT)
        if threading.current_thread() is not threading.main_thread() or previous is signal.SIG_IGN:
            return lambda: None  # signals go to the main thread only; an ignored Ctrl-C stays ignored

        def request_stop(signum, frame):
            if self.stop:
                raise KeyboardInterrupt
            self.stop = True

        signal.signal(signal.SIGINT, request_stop)
        return lambda: signal.signal(signal.SIGINT, previous)

    def warm_up(self) -> None:
        """Two calls at batch 1 and two at --batch-size before the clock starts: a backend's first calls at
        a size (ONNX Runtime's first run; LiteNet CUDA's plan, then its graph capture) are set-up, not the
        stream's pace."""
        import numpy as np

        for size in dict.fromkeys((1, self.o.batch_size)):
            for _ in range(2):
                self.backend.predict(np.zeros((size, framelib.SIZE, framelib.SIZE, 3), np.uint8))

    def _stream(self, start: float) -> None:
        batch, pending = [], []
        while not self.stop and (self.o.max_frames is None or self.reader.index < self.o.max_frames):
            wanted = self.reader.index % self.o.every == 0
            if self.o.realtime:
                self._wait_until(start + self.reader.index / self.fps)
            t0 = self.clock()
            got = self.reader.next_frame(decode=wanted or self.o.out is not None)
            last_read = self.clock() - t0
            if got is None:
                break
            index, frame = got
            self.stages.add("decode", last_read, 1)
            self._seen(frame)
            arrived = self.clock()
            if index % self.o.every == 0:
                batch.append((index, frame, arrived))
            pending.append((index, frame))
            # send the batch when full, or when the next read (taken to last as long as this one)
            # would keep its first frame past the latency budget
            if batch and (len(batch) >= self.o.batch_size or
                          self.clock() - batch[0][2] + last_read >= self.o.max_latency_ms / 1e3):
                self._classify(batch, pending)
                if self.o.realtime:
                    self._lag(start, batch)
                batch, pending = [], []
            elif not batch:
                self._write(pending)
                pending = []
        if batch or pending:  # the end, or the first Ctrl-C: the frames in hand are finished
            self._classify(batch, pending)

    def _decode_all(self) -> list:
        """Every frame (to --max-frames) decoded into memory, after checking that they fit."""
        t0 = self.clock()
        first = self.reader.next_frame()
        if first is None:
            return []
        self._seen(first[1])
        frames = [(*first, self.clock())]
        known = [n for n in (self.o.max_frames, self.reader.total) if n is not None]
        if not known:
            raise VideoError(f"{self.spec.text}: --predecode needs --max-frames for a source of unknown length")
        total = min(known)
        need = total * first[1].nbytes
        free = available_memory()
        if free is not None and need > free // 2:
            raise VideoError(f"{self.spec.text}: --predecode would hold {need / 2**20:,.0f} MiB of frames, more than "
                             f"half the memory available ({free / 2**20:,.0f} MiB); lower --max-frames")
        while not self.stop and len(frames) < total and (got := self.reader.next_frame()) is not None:
            frames.append((*got, self.clock()))
        self.stages.add("decode", self.clock() - t0, len(frames))
        return frames

    def _classify_decoded(self, decoded: list) -> None:
        batch, pending = [], []
        for index, frame, arrived in decoded:
            if self.stop:
                break
            if self.o.out is not None:
                pending.append((index, frame))
            if index % self.o.every == 0:
                batch.append((index, frame, arrived))
            if len(batch) == self.o.batch_size:
                todo, batch, pending = (batch, pending), [], []
                self._classify(*todo)
        if batch or pending:
            self._classify(batch, pending)

    def _seen(self, frame) -> None:
        if self.shape is None:
            self.shape = frame.shape

    # --- one batch -----------------------------------------------------------------------------------

    def _classify(self, batch: list, pending: list) -> None:
        """Resize and classify `batch`, emit its records, write the frames of `pending` (in order) to --out."""
        labels = {}
        if batch:
            t0 = self.clock()
            pixels = framelib.to_batch([f for _, f, _ in batch], self.cv2, self.pool)
            t1 = self.clock()
            logits = self.backend.predict(pixels)
            t2 = self.clock()
            self.stages.add("resize", t1 - t0, len(batch))
            self.stages.add("inference", t2 - t1, len(batch))
            self.stages.batches += 1
            records = vr.frame_records(self.spec.text, [i for i, _, _ in batch],
                                       [self._time(i, arrived) for i, _, arrived in batch], logits,
                                       self.backend.classes, self.o.topk, self.backend.name, self.precision,
                                       self.model, 1e3 * (t2 - t1) / len(batch))
            for record in records:
                self.emit(record)
                labels[record["frame"]] = f"{record['class']} {record['score']:.2f}"
            self.classified += len(batch)
            self.stages.add("output", self.clock() - t2, len(batch))
        self._write(pending, labels)

    def _write(self, pending: list, labels: dict | None = None) -> None:
        """Annotate and write frames to --out in order; a frame not classified shows the last label."""
        if self.o.out is None or not pending:
            return
        t0 = self.clock()
        for index, frame in pending:
            self.last_label = (labels or {}).get(index, self.last_label)
            framelib.annotate(frame, f"{self.last_label}  #{index}", self.cv2)
            self._writer_for(frame).write(frame)
        self.stages.add("output", self.clock() - t0, 0)  # counted per classified frame

    def _writer_for(self, frame):
        if self.writer is None:
            h, w = frame.shape[:2]
            fourcc = self.cv2.VideoWriter_fourcc(*FOURCC.get(Path(self.o.out).suffix.lower(), "mp4v"))
            self.writer = self.cv2.VideoWriter(self.o.out, fourcc, self.fps or 30.0, (w, h))
            if not self.writer.isOpened():
                self.writer = None
                raise VideoError(f"{self.o.out}: cannot be written (no such folder, or a suffix OpenCV cannot "
                                 f"encode; use .mp4 or .avi)")
        return self.writer

    # --- time ----------------------------------------------------------------------------------------

    def _time(self, index: int, arrived: float) -> float:
        """A frame's time: a file's frame number over its frame rate; a live source's arrival since the start
        (the rate a camera or stream states is a nominal one)."""
        return index / self.fps if self.fps and not self.spec.live else arrived - self.start

    def _wait_until(self, due: float) -> None:
        delay = due - self.clock()
        if delay > 0:
            time.sleep(delay)

    def _lag(self, start: float, batch: list) -> None:
        """After a batch under --realtime: how far each frame finished behind its due time. Late: beyond
        the wait batching allows (--max-latency) and one frame interval more."""
        now = self.clock()
        allowed = self.o.max_latency_ms / 1e3 + 1 / self.fps
        for index, _, _ in batch:
            lag = now - (start + index / self.fps)
            self.max_lag = max(self.max_lag, lag)
            self.late += lag > allowed
        self.end_lag = lag  # at the end of the run: whether a backlog was left

    # --- the end -------------------------------------------------------------------------------------

    def summary(self, wall: float, cpu: float, interrupted: bool) -> dict:
        """The summary record (schema litenet-video/1, type "summary"), emitted and returned."""
        frames = self.reader.index
        stages = self.stages.report()
        busy = sum(self.stages.seconds[n] for n in ("resize", "inference", "output"))
        record = {"schema": vr.SCHEMA, "type": "summary", "source": self.source_info(), "frames": frames,
                  "classified": self.classified, "failed": self.reader.failed, "drops": self.reader.drops,
                  "ended_early": self.reader.ended_early, "interrupted": interrupted,
                  "predecoded": self.o.predecode, "wall_s": wall,
                  "fps": (self.classified if self.o.predecode else frames) / wall if wall > 0 else 0.0,
                  "classify_fps": self.classified / busy if busy > 0 else 0.0,
                  "cpu_s": cpu, "cpu_cores": cpu / wall if wall > 0 else 0.0, "stages": stages,
                  "cpu_ms_per_frame": 1e3 * cpu / frames if frames else 0.0,
                  "realtime": {"fps": self.fps, "late_frames": self.late, "max_lag_ms": 1e3 * self.max_lag,
                               "end_lag_ms": 1e3 * self.end_lag} if self.o.realtime else None,
                  "backend": self.backend.name, "precision": self.precision, "model": self.model,
                  "batch_size": self.o.batch_size, "max_latency_ms": self.o.max_latency_ms, "every": self.o.every,
                  "threads": self.o.threads, "out": self.o.out}
        self.emit(record)
        return record

    def source_info(self) -> dict:
        return {"name": self.spec.text, "kind": self.spec.kind, "fps": self.fps, "frame_count": self.reader.total,
                "width": self.shape[1] if self.shape else None, "height": self.shape[0] if self.shape else None}


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (Linux), else None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
