"""Shared helpers of the runtime tests: the tiny model shapes exported, and hand-made broken files."""

from __future__ import annotations

import io
import struct
import sys
import zlib
from pathlib import Path

# NOTE: reuses the export tests' tiny models and synthetic data set, and lets `.venv/bin/pytest
# tests/runtime` import litenet from a checkout that is not pip-installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))

import export_fixtures as fx  # noqa: E402,F401

EXPORTED = ("full-shift", "seed-like", "mixer-8")
# What a Raspberry Pi's runtime-only install does not have.
PI_BLOCKED = ("litenet.train", "litenet.export", "onnx", "cupy", "tqdm", "matplotlib", "safetensors", "torch")


def pi_install_script(entry: str, blocked: tuple[str, ...] = PI_BLOCKED) -> str:
    """Python code (for `python -c CODE ARGS...`) that runs `entry`.main(ARGS) with `blocked` made
    unimportable, asserts that none of them was loaded, and exits with main's status."""
    return f"""
import sys
BLOCKED = {blocked!r}

class Block:
    def find_spec(self, name, path=None, target=None):
        if name != "onnxruntime" and not name.startswith("onnxruntime.") and any(
                name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"{{name}} is blocked: the Raspberry Pi install does not have it")
        return None

sys.meta_path.insert(0, Block())
from {entry} import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED))
assert not loaded, loaded
sys.exit(code)
"""


def png_bytes(img) -> bytes:
    """A Pillow image encoded as PNG."""
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """A tiny valid-looking PNG whose header claims width × height pixels (1-bit grey)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = zlib.compress(b"\0" * 64)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
