"""A CIFAR-10 source: a folder holding one of the layouts, or an official .tar.gz, read the same way."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from litenet.data.archive import ArchiveSource
from litenet.data.readers import check_batch_size, layout_of
from litenet.errors import LiteNetError


class Source(Protocol):
    """What the converter needs from a source: its layout, which files it has, and their bytes."""

    path: Path
    kind: str  # "folder" or "archive"
    layout: str  # "binary" or "python"

    def has(self, name: str) -> bool: ...

    def read_many(self, names: Iterable[str]) -> Iterator[tuple[str, bytes]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> "Source": ...

    def __exit__(self, *exc) -> None: ...


class FolderSource:
    """A folder that directly holds the batch files of one layout."""

    kind = "folder"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.layout = layout_of(p.name for p in self.path.iterdir() if p.is_file())
        if self.layout is None:
            raise LiteNetError(f"{self.path}: holds no CIFAR-10 batch files (data_batch_1.bin ... or data_batch_1 ...)")

    def has(self, name: str) -> bool:
        """Whether the folder holds this file."""
        return (self.path / name).is_file()

    def read_many(self, names):
        """Yield (name, bytes) in the order asked for."""
        for name in names:
            path = self.path / name
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO would block a plain open
                with os.fdopen(fd, "rb") as f:
                    info = os.fstat(fd)
                    check_batch_size(path, info.st_size, stat.S_ISREG(info.st_mode))
                    os.set_blocking(fd, True)
                    data = f.read()
            except OSError as e:
                raise LiteNetError(f"{path}: cannot read ({e.strerror})") from None
            yield name, data

    def close(self) -> None:
        """Nothing to release for a folder."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_source(path: Path) -> Source:
    """Open a folder or a .tar.gz archive as a Source; `path` must directly hold the layout or be the archive."""
    path = Path(path)
    if path.is_dir():
        return FolderSource(path)
    if path.is_file():
        return ArchiveSource(path)
    raise LiteNetError(f"{path}: no such file or folder")
