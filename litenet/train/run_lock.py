"""One `litenet train` at a time per run folder: a lock file held for the whole run, released by the OS
when the process ends however it ends, and the leftovers of a killed run's writes cleaned up."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from pathlib import Path

from litenet.errors import EnvironmentProblem
from litenet.paths import make_folder

LOCK_FILE = ".litenet-train.lock"
# What litenet.atomic leaves when a process dies mid-write: `.<name>.<8 random characters>.tmp`.
ATOMIC_LEFTOVER = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")


@contextlib.contextmanager
def hold_run_folder(out: Path):
    """Hold `out`'s lock while the body runs; EnvironmentProblem when another process holds it.

    NOTE: flock, not a pid file: the kernel drops the lock when its holder dies (kill -9 included),
    so a stale lock file never blocks the next run, and no pid has to be checked for liveness.
    """
    out = Path(out)
    created = not out.exists()
    make_folder(out)
    fd = _acquire(out / LOCK_FILE, out)
    try:
        removed = remove_leftovers(out)
        if removed:
            print(f"litenet train: removed {len(removed)} unfinished write(s) of a run that was killed in {out}: "
                  f"{', '.join(removed)}", flush=True)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(out / LOCK_FILE)  # while still held: the next run creates a fresh one
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: a run refused before writing anything leaves no folder


def _acquire(path: Path, out: Path) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                holder = _holder(path)
                raise EnvironmentProblem(f"{out} is in use by another `litenet train`{holder}; wait for it to "
                                         "finish, or choose another --out") from None
            raise
        # The holder before us may have unlinked the file between our open and our lock: then the
        # lock we hold is on a file nobody else will open. Start again on the one now at `path`.
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def remove_leftovers(out: Path) -> list[str]:
    """Delete the temporary files of writes that never finished (their process died); their names."""
    removed = []
    for path in sorted(out.iterdir()):
        if ATOMIC_LEFTOVER.match(path.name) and path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path.name)
    return removed
