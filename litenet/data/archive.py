"""Read CIFAR-10 batch files straight out of an official .tar.gz, refusing archives with unsafe members."""

from __future__ import annotations

import tarfile
import zlib
from pathlib import Path, PurePosixPath

from litenet.data.readers import LAYOUTS, check_batch_size, layout_of
from litenet.errors import LiteNetError

# What a damaged .tar.gz raises from tarfile, gzip and zlib (gzip.BadGzipFile is an OSError).
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error)
_LAYOUT_FOLDERS = {"", *(spec["folder"] for spec in LAYOUTS.values())}


def _corrupt(path: Path, err: BaseException) -> LiteNetError:
    """The one message for an archive that cannot be read to the end."""
    return LiteNetError(f"{path}: truncated or corrupt archive ({type(err).__name__}: {err}); "
                        "delete it and download it again")


def check_member(path: Path, member: tarfile.TarInfo) -> None:
    """Refuse members that could write outside a target folder if extracted, or that are not plain files/folders."""
    # NOTE: we never extract (members are read into memory), so tarfile's filter="data" has nothing
    # to guard; these checks are stricter still, because the official archives hold only plain files
    # in one folder and anything else means the archive is not what it claims to be.
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or "\\" in member.name or ":" in member.name:
        raise LiteNetError(f"{path}: member {member.name!r} points outside the archive folder; "
                           "refusing this archive, use the official one")
    if member.issym() or member.islnk():
        raise LiteNetError(f"{path}: member {member.name!r} is a link; refusing this archive, use the official one")
    if not (member.isfile() or member.isdir()):
        raise LiteNetError(f"{path}: member {member.name!r} is a device or special file; "
                           "refusing this archive, use the official one")


class ArchiveSource:
    """An official cifar-10-binary.tar.gz or cifar-10-python.tar.gz, read without extracting it."""

    kind = "archive"

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._tar = tarfile.open(self.path, "r:*")
            # Reading every header walks the whole archive once, so truncation shows up here, early.
            members = self._tar.getmembers()
        except _ARCHIVE_ERRORS as e:
            raise _corrupt(self.path, e) from None
        self._members = {}
        for member in members:
            check_member(self.path, member)
            folder, _, base = member.name.removeprefix("./").rpartition("/")
            if member.isfile() and folder in _LAYOUT_FOLDERS:
                check_batch_size(f"{self.path}: member {member.name}", member.size)  # from its header, before reading
                self._members[base] = member
        self.layout = layout_of(self._members)
        if self.layout is None:
            self._tar.close()
            raise LiteNetError(f"{self.path}: holds no CIFAR-10 batch files; use the official "
                               "cifar-10-binary.tar.gz or cifar-10-python.tar.gz")

    def has(self, name: str) -> bool:
        """Whether the archive holds this file (in a layout folder or at the top)."""
        return name in self._members

    def read_many(self, names):
        """Yield (name, bytes) in archive order, so the gzip stream is decompressed forwards only."""
        members = sorted((self._members[n] for n in names), key=lambda m: m.offset_data)
        for member in members:
            try:
                data = self._tar.extractfile(member).read()
            except _ARCHIVE_ERRORS as e:
                raise _corrupt(self.path, e) from None
            if len(data) != member.size:
                raise _corrupt(self.path, EOFError(f"{member.name} ends after {len(data)} of {member.size} bytes"))
            yield member.name.rpartition("/")[2], data

    def close(self) -> None:
        """Close the archive file."""
        self._tar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
