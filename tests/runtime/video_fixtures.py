"""Clips and broken sources for the --video tests, written with OpenCV (what --video reads with), and
a small local HTTP server whose first connection is cut halfway (a stream that drops)."""

from __future__ import annotations

import http.server
import socketserver
import sys
import threading
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import video_clip  # noqa: E402

SHIPPED = REPO / "models" / "litenet-base"


def clip_images(count: int) -> tuple[np.ndarray, list[str] | None]:
    """Real CIFAR-10 test images with their labels where this machine has the data set; else seeded
    random images and None (bench/video_clip.py)."""
    return video_clip.cifar_test_images(count)


def write(path: Path, images: np.ndarray, hold: int = 2, fps: float = 30.0) -> Path:
    video_clip.write_clip(path, images, hold=hold, fps=fps)
    return path


def truncated(src: Path, dst: Path, keep: float = 0.5) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[:int(len(data) * keep)])
    return dst


def corrupted(src: Path, dst: Path, at: float = 0.5, length: int = 3000) -> Path:
    """A copy with `length` bytes of noise in the middle: one frame's data destroyed, the index intact."""
    data = bytearray(src.read_bytes())
    start = int(len(data) * at)
    data[start:start + length] = np.random.default_rng(0).integers(0, 256, length, dtype=np.uint8).tobytes()
    dst.write_bytes(bytes(data))
    return dst


class DroppingServer:
    """An MJPEG stream over HTTP on 127.0.0.1 (multipart JPEGs, as IP cameras serve them) that drops:
    the first connection sends the first `cut` frames and is shut, the second sends the rest and is
    shut too, and later requests are refused (404) — a camera that comes back once, then goes away."""

    def __init__(self, frames: list[np.ndarray], cut: int):
        from litenet.runtime.video_source import import_cv2

        cv2 = import_cv2()
        self.jpegs = [cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes() for f in frames]
        self.cut, self.requests = cut, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                outer.requests += 1
                if outer.requests > 2:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
                self.end_headers()
                part = outer.jpegs[:outer.cut] if outer.requests == 1 else outer.jpegs[outer.cut:]
                for jpeg in part:
                    self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(jpeg)
                                     + jpeg + b"\r\n")
                self.wfile.flush()
                self.connection.shutdown(2)

            def log_message(self, *args):
                pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/stream.mjpg"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
