"""Broken and live sources of `litenet-infer --video`: each problem is one line and the stream goes on
where it can; a dropped stream reconnects; picamera2 through a stand-in; the install without the
video extra refuses --video in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from litenet.runtime import cli
from litenet.runtime.video_source import FrameReader, SourceSpec, VideoError, parse_source

from video_fixtures import REPO, SHIPPED, DroppingServer, corrupted, truncated

cv2 = pytest.importorskip("cv2")


def video(capsys, *argv) -> tuple[int, list[dict], str]:
    code = cli.main(["--json", "--video", *map(str, argv), "--model", str(SHIPPED), "--precision", "int8"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("litenet-infer: error: ")]


@pytest.mark.parametrize("make, message", [
    (lambda d, clip: d / "missing.mp4", "no such file"),
    (lambda d, clip: (d / "notes.mp4").write_text("not a video\n") and d / "notes.mp4", "not a video OpenCV can decode"),
    (lambda d, clip: (d / "empty.mp4").write_bytes(b"") or d / "empty.mp4", "empty file"),
    # an .mp4 writes its index last: cut short, it cannot be opened at all
    (lambda d, clip: truncated(clip, d / "cut.mp4"), "not a video OpenCV can decode"),
    (lambda d, clip: d, "is a folder"),
    (lambda d, clip: "97", "camera 97: cannot be opened"),
    (lambda d, clip: "http://127.0.0.1:9/none.avi", "the stream cannot be opened"),
])
def test_a_source_that_cannot_be_opened_is_one_line(capsys, tmp_path, mp4_clip, make, message):
    code, rows, err = video(capsys, make(tmp_path, mp4_clip))
    assert code == cli.EXIT_SOME_FAILED == 1
    assert err.count("\n") == 1 and errors(err) and message in err and "Traceback" not in err
    assert [r["type"] for r in rows] == ["error"] and message in rows[0]["error"]


def test_a_truncated_file_is_classified_up_to_where_it_breaks(capsys, lossless_clip, tmp_path):
    code, rows, err = video(capsys, truncated(lossless_clip, tmp_path / "cut.avi"))
    frames = [r for r in rows if r["type"] == "frame"]
    summary = rows[-1]
    assert code == 1 and len(errors(err)) == 1 and "nothing decodes after frame" in err and "of 24" in err
    assert 0 < len(frames) < 24 and summary["ended_early"] and summary["classified"] == len(frames)
    assert summary["frames"] + summary["failed"] == 24


def test_a_corrupt_frame_is_skipped_and_the_stream_goes_on(capsys, lossless_clip, tmp_path):
    code, rows, err = video(capsys, corrupted(lossless_clip, tmp_path / "bad.avi"))
    frames = [r["frame"] for r in rows if r["type"] == "frame"]
    assert code == 1 and len(errors(err)) == 1 and "could not be decoded; skipped" in err
    assert rows[-1]["failed"] >= 1 and len(frames) >= 20 and frames[-1] >= 21  # it went on past the damage


def test_a_dropped_stream_reconnects_and_goes_on(capsys, clip_source, monkeypatch):
    from video_clip import frame_of

    monkeypatch.setattr("litenet.runtime.video_source.time.sleep", lambda s: None)
    with DroppingServer([frame_of(image) for image in clip_source[0]], cut=5) as server:
        code, rows, err = video(capsys, server.url, "--reconnects", "1")
    frames = [r["frame"] for r in rows if r["type"] == "frame"]
    assert server.requests == 3 and code == 1 and frames == list(range(12))  # 5 frames, a drop, the other 7
    assert errors(err) == [f"litenet-infer: error: {server.url}: the stream dropped after 5 frames; reconnecting (1/1)",
                           f"litenet-infer: error: {server.url}: the stream dropped after 12 frames; reconnecting (1/1)",
                           f"litenet-infer: error: {server.url}: the stream is gone (1 reconnects failed); "
                           "stopping after 12 frames"]
    summary = rows[-1]
    assert summary["drops"] == 2 and summary["ended_early"] and summary["source"]["kind"] == "stream"


class FakeCapture:
    """A capture whose reads come from a list: arrays, or None for a failed read; reopen() may fail."""

    def __init__(self, reads, reopen_ok=True, total=None):
        self.reads, self.reopen_ok, self.total, self.reopened = list(reads), reopen_ok, total, 0

    def read(self):
        return self.reads.pop(0) if self.reads else None

    def skip(self):
        return self.read() is not None

    def frame_count(self):
        return self.total

    def fps(self):
        return None

    def reopen(self):
        self.reopened += 1
        if not self.reopen_ok:
            raise VideoError("gone")

    def close(self):
        pass


def read_all(reader):
    got = []
    while (item := reader.next_frame()) is not None:
        got.append(item[0])
    return got


def test_a_camera_that_stays_gone_ends_after_the_reconnects():
    frame = np.zeros((4, 4, 3), np.uint8)
    capture, lines, waits = FakeCapture([frame, frame, None], reopen_ok=False), [], []
    reader = FrameReader(SourceSpec("0", "camera", 0), capture, lines.append, reconnects=3, sleep=waits.append)
    assert read_all(reader) == [0, 1] and capture.reopened == 3 and waits == [0.5, 1.0, 2.0]
    assert reader.ended_early and reader.drops == 1
    assert lines[-1] == "0: the stream is gone (3 reconnects failed); stopping after 2 frames" and len(lines) == 4


def test_a_file_counts_the_frames_it_could_not_decode():
    frame = np.zeros((4, 4, 3), np.uint8)
    reads = [frame, None, None, frame, frame, None, None, None]
    lines = []
    reader = FrameReader(SourceSpec("f.avi", "file", "f.avi"), FakeCapture(reads, total=8), lines.append)
    assert read_all(reader) == [0, 3, 4] and reader.failed == 2 + 3 and reader.ended_early
    assert lines == ["f.avi: frames 1-2 could not be decoded; skipped",
                     "f.avi: nothing decodes after frame 5 of 8 (the file is truncated or damaged); stopping there"]


def test_parse_source_kinds():
    assert parse_source("0").kind == "camera" and parse_source("0").target == 0
    assert parse_source("rtsp://cam/stream").kind == "stream"
    assert (parse_source("picamera2").kind, parse_source("picamera2:1").target) == ("picamera2", 1)
    with pytest.raises(VideoError, match="expected picamera2 or picamera2:N"):
        parse_source("picamera2:front")


def test_picamera2_through_a_stand_in(capsys, monkeypatch, clip_source):
    """A stand-in for picamera2's Picamera2 (the real one needs a Pi's camera stack): frames in
    RGB888, which picamera2 lays out B, G, R; then the camera fails once and is reopened."""
    from video_clip import frame_of

    shown = [frame_of(image) for image in clip_source[0][:4]]
    opened = []

    class Picamera2:
        def __init__(self, camera_num=0):
            opened.append(camera_num)
            self.left = list(shown) if len(opened) == 1 else shown[:2]

        def create_video_configuration(self, main):
            assert main == {"size": (640, 480), "format": "RGB888"}
            return main

        def configure(self, config):
            pass

        def start(self):
            if len(opened) > 2:
                raise RuntimeError("Camera __init__ sequence did not complete")

        def capture_array(self, name="main"):
            if not self.left:
                raise RuntimeError("camera frontend has timed out")
            return self.left.pop(0)

        def stop(self):
            pass

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "picamera2", types.SimpleNamespace(Picamera2=Picamera2))
    monkeypatch.setattr("litenet.runtime.video_source.time.sleep", lambda s: None)
    code, rows, err = video(capsys, "picamera2", "--reconnects", "1", "--max-latency", "0")
    frames = [r for r in rows if r["type"] == "frame"]
    expected = [r["class"] for r in frames[:4]]
    assert opened == [0, 0, 0] and len(frames) == 6 and [r["class"] for r in frames[4:]] == expected[:2]
    assert rows[-1]["source"]["kind"] == "picamera2" and rows[-1]["drops"] == 2 and code == 1
    assert "picamera2: the stream is gone (1 reconnects failed)" in err


def test_picamera2_missing_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "picamera2", None)
    code, rows, err = video(capsys, "picamera2")
    assert code == 1 and err.count("\n") == 1 and "picamera2 is not installed" in err and "apt install" in err


def test_without_the_video_extra_video_is_refused_in_one_line(tmp_path, mp4_clip):
    """The runtime-only install (a Pi's pip install litenet-nn) has no OpenCV: one line naming the extra."""
    code = ("import sys\nsys.modules['cv2'] = None\n"
            "from litenet.runtime.cli import main\n"
            f"sys.exit(main(['--video', {str(mp4_clip)!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 4 and result.stdout == ""  # a missing extra: the machine (docs/errors.md)
    assert result.stderr == ("litenet-infer: error: --video needs the video extra (OpenCV is not installed): "
                             "pip install 'litenet-nn[video]'\n")
