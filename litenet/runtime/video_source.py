"""Where `litenet-infer --video` gets its frames: a file, a stream URL or a camera index through
OpenCV's capture, or a Raspberry Pi camera through picamera2 — and what it does when they fail.

Every frame comes out as uint8 BGR (H, W, 3), OpenCV's order (picamera2's "RGB888" is that order
too). Failures are told as one line each through `warn`, and the stream goes on where it can:

- a file: a frame that does not decode is skipped; a run of them is told once, when the file goes
  on or when it ends early (a truncated file: "nothing decodes after frame 46 of 90").
- a stream URL or a camera: a failed read is a drop; the source is reopened up to `reconnects`
  times, waiting 0.5, 1, 2 … s between tries, then the run ends with what it has.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from litenet.distribution import install_hint
from litenet.errors import EnvironmentProblem, LiteNetError

VIDEO_EXTRA = install_hint("video")
# Consecutive undecodable frames after which a file is taken to end there (1 s of 60 fps video).
MAX_BAD_IN_A_ROW = 60
PICAMERA = "picamera2"


class VideoError(LiteNetError):
    """The source cannot be opened or read at all (one line naming it)."""


def import_cv2():
    """OpenCV, quiet: its own log and FFmpeg's would print many lines for one broken source."""
    # NOTE: both variables are read when OpenCV first logs or opens a capture; a user who sets
    # them keeps their own value.
    os.environ.setdefault("OPENCV_LOG_LEVEL", "OFF")
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # AV_LOG_QUIET
    try:
        import cv2
    except ImportError:
        raise EnvironmentProblem(f"--video needs the video extra (OpenCV is not installed): {VIDEO_EXTRA}") from None
    return cv2


@dataclass
class SourceSpec:
    """What the user named: kind is "file", "stream" (a URL), "camera" (an index) or "picamera2"."""

    text: str
    kind: str
    target: str | int

    @property
    def live(self) -> bool:
        """A live source delivers frames at its own pace and may drop; a file is read as fast as it decodes."""
        return self.kind != "file"


def parse_source(text: str) -> SourceSpec:
    """The kind of source `text` names; a missing file or a folder is refused here, before anything opens."""
    if text.isdigit():
        return SourceSpec(text, "camera", int(text))
    if text == PICAMERA or text.startswith(PICAMERA + ":"):
        index = text.partition(":")[2] or "0"
        if not index.isdigit():
            raise VideoError(f"{text}: expected picamera2 or picamera2:N (N the camera number)")
        return SourceSpec(text, PICAMERA, int(index))
    if "://" in text:
        return SourceSpec(text, "stream", text)
    path = Path(text)
    if path.is_dir():
        raise VideoError(f"{text}: is a folder, not a video (give a file, a stream URL or a camera index)")
    if not path.exists():
        raise VideoError(f"{text}: no such file (give a video file, a stream URL or a camera index)")
    return SourceSpec(text, "file", text)


class OpenCVCapture:
    """cv2.VideoCapture over a file, a URL or a camera index; read() → BGR frame or None."""

    def __init__(self, spec: SourceSpec, threads: int = 1):
        self.cv2 = import_cv2()
        self.spec, self.threads = spec, threads
        self.cap = self._open()

    def _open(self):
        cv2 = self.cv2
        if self.spec.kind == "camera":
            cap = cv2.VideoCapture(self.spec.target)
        else:
            # FFmpeg decodes with as many threads as cores unless told; --video-threads bounds it.
            params = [cv2.CAP_PROP_N_THREADS, self.threads] if hasattr(cv2, "CAP_PROP_N_THREADS") else []
            cap = cv2.VideoCapture(self.spec.target, cv2.CAP_FFMPEG, params)
        if not cap.isOpened():
            cap.release()
            raise VideoError(self._why_not())
        return cap

    def _why_not(self) -> str:
        kind, text = self.spec.kind, self.spec.text
        if kind == "camera":
            return f"camera {text}: cannot be opened (no such camera, or it is busy)"
        if kind == "stream":
            return f"{text}: the stream cannot be opened (unreachable, refused, or not a video)"
        if not os.access(text, os.R_OK):
            return f"{text}: permission denied"
        size = Path(text).stat().st_size
        return (f"{text}: not a video OpenCV can decode ({'empty file' if size == 0 else f'{size:,} bytes'}; "
                "damaged, truncated before its index, or not a video at all)")

    def read(self):
        ok, frame = self.cap.read()
        return frame if ok and frame is not None and frame.size else None

    def skip(self) -> bool:
        """Advance one frame without converting it (cheaper than read); False when that failed."""
        return bool(self.cap.grab())

    def fps(self) -> float | None:
        fps = self.cap.get(self.cv2.CAP_PROP_FPS)
        return float(fps) if fps and 0 < fps < 1000 else None

    def frame_count(self) -> int | None:
        count = self.cap.get(self.cv2.CAP_PROP_FRAME_COUNT)
        return int(count) if self.spec.kind == "file" and count and count > 0 else None

    def reopen(self) -> None:
        self.cap.release()
        self.cap = self._open()

    def close(self) -> None:
        self.cap.release()


class PicameraCapture:
    """A Raspberry Pi camera through picamera2 (Raspberry Pi OS: `apt install python3-picamera2`)."""

    SIZE = (640, 480)

    def __init__(self, spec: SourceSpec, threads: int = 1):
        try:
            from picamera2 import Picamera2
        except ImportError:
            raise VideoError(f"{spec.text}: picamera2 is not installed (on Raspberry Pi OS: "
                             "sudo apt install python3-picamera2; or give a camera index for OpenCV)") from None
        self.spec, self._cls = spec, Picamera2
        self.cam = self._open()

    def _open(self):
        try:
            cam = self._cls(self.spec.target)
            cam.configure(cam.create_video_configuration(main={"size": self.SIZE, "format": "RGB888"}))
            cam.start()
        except Exception as exc:  # noqa: BLE001 - libcamera raises RuntimeError, IndexError, OSError ...
            raise VideoError(f"{self.spec.text}: the camera cannot be started ({exc})") from None
        return cam

    def read(self):
        try:
            return self.cam.capture_array("main")
        except Exception:  # noqa: BLE001 - a camera that went away: a drop, handled by the reader
            return None

    def skip(self) -> bool:
        return self.read() is not None

    def fps(self) -> float | None:
        return None

    def frame_count(self) -> int | None:
        return None

    def reopen(self) -> None:
        self.close()
        self.cam = self._open()

    def close(self) -> None:
        try:
            self.cam.stop()
            self.cam.close()
        except Exception:  # noqa: BLE001 - closing a camera that already failed
            pass


def open_capture(spec: SourceSpec, threads: int = 1):
    """The capture object for `spec` (raises VideoError with one line when it cannot be opened)."""
    return PicameraCapture(spec, threads) if spec.kind == PICAMERA else OpenCVCapture(spec, threads)


class FrameReader:
    """Frames of a source with the failure policy of the module docstring: next_frame() → (index, frame) or None at the end."""

    def __init__(self, spec: SourceSpec, capture, warn, reconnects: int = 3, sleep=time.sleep):
        self.spec, self.capture, self.warn, self.reconnects, self.sleep = spec, capture, warn, reconnects, sleep
        self.index = 0  # the number of the next frame
        self.failed = 0  # frames of a file that could not be decoded
        self.drops = 0  # times a live source dropped
        self.ended_early = False  # a file ended before its header's frame count, or a live source was lost
        self._bad_from: int | None = None  # the first frame of the current run of undecodable ones
        self.total = capture.frame_count()

    def next_frame(self, decode: bool = True):
        """(index, BGR frame — None when decode is False), or None when the source has ended."""
        while True:
            frame = self.capture.read() if decode else None
            if (frame is not None) if decode else self.capture.skip():
                index = self.index
                self.index += 1
                if self._bad_from is not None:
                    self._report_skipped(index)
                return index, frame
            if self.spec.live:
                if not self._reconnect():
                    return None
                continue
            if self._bad_from is None:
                self._bad_from = self.index
            self.index += 1
            if not self._file_goes_on():
                return None

    def _report_skipped(self, index: int) -> None:
        first, last = self._bad_from, index - 1
        self.failed += index - first
        self.warn(f"{self.spec.text}: {'frame %d' % first if first == last else f'frames {first}-{last}'} "
                  "could not be decoded; skipped")
        self._bad_from = None

    def _file_goes_on(self) -> bool:
        """After a failed read of a file: try the next frame, or end (telling why when it ended early)."""
        if self.total is not None and self.index < self.total and self.index - self._bad_from < MAX_BAD_IN_A_ROW:
            return True
        # NOTE: some containers give an estimated frame count (from the duration); a shortfall of a
        # frame or two at the end is taken as the end, not as damage.
        if self.total is not None and self.total - self._bad_from > max(2, self.total // 100):
            self.failed += self.total - self._bad_from
            self.ended_early = True
            self.warn(f"{self.spec.text}: nothing decodes after frame {self._bad_from} of {self.total} "
                      "(the file is truncated or damaged); stopping there")
        self.index = self._bad_from  # the frames read: the failed reads at the end were no frames
        return False

    def _reconnect(self) -> bool:
        """After a failed read of a live source: reopen it, waiting longer after each failed try."""
        self.drops += 1
        for attempt in range(1, self.reconnects + 1):
            self.warn(f"{self.spec.text}: the stream dropped after {self.index} frames; "
                      f"reconnecting ({attempt}/{self.reconnects})")
            self.sleep(0.5 * 2 ** (attempt - 1))
            try:
                self.capture.reopen()
                return True
            except VideoError:
                continue
        self.ended_early = True
        self.warn(f"{self.spec.text}: the stream is gone ({self.reconnects} reconnects failed); "
                  f"stopping after {self.index} frames")
        return False
