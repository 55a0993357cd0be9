"""The exception types for user mistakes and the exit status each one ends a command with (docs/errors.md).

Every command prints a user mistake as one line on stderr, `PROG: error: MESSAGE`, and exits with the
status of its class; an internal bug keeps its traceback. LITENET_DEBUG=1 shows the traceback of a
user mistake too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

EXIT_OK = 0
EXIT_SOME_FAILED = 1  # litenet-infer, litenet explain: some inputs failed, the others were answered
EXIT_USAGE = 2  # a flag or setting out of range (argparse's own status for a bad command line)
EXIT_INPUT = 3  # a model, weights, config, data or archive file that is missing, damaged or refused
EXIT_ENVIRONMENT = 4  # the machine: permission denied, disk full, a folder in use, a missing device
EXIT_DIVERGED = 5  # litenet train: the loss became NaN or infinite; training stopped (docs/errors.md)
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class LiteNetError(Exception):
    """A problem the user can fix (bad path, bad file, bad model); never an internal bug."""

    exit_status = EXIT_INPUT


class UsageError(LiteNetError):
    """A setting or flag outside what it allows (named, with the allowed range)."""

    exit_status = EXIT_USAGE


class EnvironmentProblem(LiteNetError):
    """The machine refuses: permissions, a full disk, a run folder another process holds."""

    exit_status = EXIT_ENVIRONMENT


def debugging() -> bool:
    """LITENET_DEBUG=1: let user mistakes show their traceback too."""
    return os.environ.get("LITENET_DEBUG", "") not in ("", "0")


@contextlib.contextmanager
def naming(path) -> Iterator[None]:
    """Give an OSError raised inside the block that names no file (a full disk met by write() or fsync())
    the file being written, so its one-line message says where; "standard output" is reserved for stdout."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def describe_os_error(exc: OSError) -> str:
    """An OSError as one line that names the file and what to do about it."""
    where = exc.filename if exc.filename is not None else "standard output"
    where = repr(str(where)) if any(c in str(where) for c in "\n\r") else str(where)
    fixes = {
        errno.EACCES: "permission denied; check the file's and its folder's permissions or choose another path",
        errno.EPERM: "operation not permitted; check the file's and its folder's permissions or choose another path",
        errno.EROFS: "read-only file system; choose a writable path",
        errno.ENOSPC: "no space left on the device; free some space or choose another path",
        errno.EDQUOT: "disk quota exceeded; free some space or choose another path",
        errno.ENOTDIR: "a part of this path is a file, not a folder; choose another path",
        errno.EISDIR: "is a folder, not a file",
        errno.ELOOP: "too many levels of symbolic links (a symlink loop); fix or remove the link",
        errno.ENAMETOOLONG: "file name too long",
        errno.ENOENT: "no such file or folder",
        errno.EEXIST: "already exists and is not a folder; choose another path",
    }
    reason = fixes.get(exc.errno, exc.strerror or exc.__class__.__name__)
    return f"{where}: {reason}"


def report(prog: str, exc: BaseException) -> int:
    """Print a user mistake (a LiteNetError or an OSError from the machine) as one line; its exit status."""
    if isinstance(exc, LiteNetError):
        message, status = str(exc), exc.exit_status
    else:
        message, status = describe_os_error(exc), EXIT_ENVIRONMENT
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    return status


def one_line(text: str) -> str:
    """A message kept on one line: a newline inside a file name is shown escaped."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
