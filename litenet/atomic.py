"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from litenet.errors import naming


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; on success it is fsynced and renamed over `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with naming(path):
            yield Path(tmp)
        # mkstemp makes 0600 (and a writer may recreate the file): give it the usual permissions
        os.chmod(tmp, 0o666 & ~_umask())
        with naming(path), open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    # The rename itself is durable only once the folder's entry is on disk (POSIX); Windows has
    # no directory handles to sync.
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_safetensors(path: str | os.PathLike, tensors: dict, metadata: dict[str, str]) -> None:
    """Write NumPy tensors as a safetensors file, atomically. safetensors reports a failed write as
    SafetensorError("… I/O error: No space left on device (os error 28)"): it is raised as the OSError it
    was, naming the file, so the command's one-line message says what and where."""
    from safetensors import SafetensorError
    from safetensors.numpy import save_file

    with atomic_path(path) as tmp:
        try:
            save_file(tensors, str(tmp), metadata=metadata)
        except SafetensorError as exc:
            found = re.search(r"os error (\d+)", str(exc))
            if found is None:
                raise
            code = int(found.group(1))
            raise OSError(code, os.strerror(code), str(path)) from exc
