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
    """Serves one file over HTTP on 127.0.0.1; the first request gets only `keep` of it, then the
    connection is shut (a stream that drops); later requests get all of it."""

    def __init__(self, payload: bytes, keep: float = 0.5):
        self.payload, self.keep, self.requests = payload, keep, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "video/x-msvideo")
                self.end_headers()
                cut = outer.requests == 1
                self.wfile.write(outer.payload[:int(len(outer.payload) * outer.keep)] if cut else outer.payload)
                self.wfile.flush()
                if cut:
                    self.connection.shutdown(2)

            def log_message(self, *args):
                pass

        self.server = socketserver.TCPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/clip.avi"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
