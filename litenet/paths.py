"""Folders made and paths looked up so that a path that exists but cannot be reached — a symlink loop, a
folder without permission — is reported as what it is, never as "no such file" or "already exists"."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def check_reachable(path: str | os.PathLike) -> None:
    """Raise the OSError of `path` unless it can be reached or simply does not exist (the caller says
    what is missing then): ELOOP for a symlink loop, EACCES for a folder it cannot enter."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


def make_folder(path: str | os.PathLike) -> Path:
    """`mkdir -p path`. Where mkdir says "File exists" because `path` is a symlink loop, the loop is named."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        check_reachable(path)
        raise
    return path
