"""Shared pieces of the adversarial tests: the commands run as a user runs them, crafted files."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "models" / "litenet-base"


def run_module(module: str, *args, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` from this checkout, output captured; a hang fails the test at `timeout`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **kw.pop("env", {})}
    env.pop("LITENET_DEBUG", None)
    kw.setdefault("capture_output", "stdout" not in kw)
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], text=True, env=env, timeout=timeout, **kw)


def one_error_line(stderr: str, prog: str) -> str:
    """The stderr of a refused command: exactly one line, `PROG: error: ...`, no traceback. A command run
    without --model first names the model it chose (litenet/runtime/model_choice.py): a note, not the error."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    if len(lines) == 2 and lines[0].startswith(f"{prog}: model ") and lines[0].endswith("--model picks another)"):
        lines = lines[1:]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), stderr
    return lines[0]


def png_header_only(path: Path, width: int, height: int, depth: int = 8, colour: int = 0) -> Path:
    """A PNG whose header claims width × height (no pixel data): what Pillow reads before decoding."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


is_root = pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                             reason="root reads and writes past permissions")
