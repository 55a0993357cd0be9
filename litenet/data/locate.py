"""Find CIFAR-10 in a fixed search order (--data, LITENET_DATA, ./data, ../shared/data), else download it."""

from __future__ import annotations

import os
from pathlib import Path

from litenet.data.download import WHERE_TO_PUT, download_settings
from litenet.data.download import download as fetch
from litenet.data.readers import LAYOUTS, layout_of
from litenet.errors import LiteNetError

# Relative to the current directory: ./data is where downloads land; ../shared/data is the
# read-only copy next to each checkout on the project's machines.
DEFAULT_PLACES = (Path("data"), Path("..") / "shared" / "data")


def find_in(path: Path) -> Path | None:
    """Return the layout folder or archive that `path` is or holds, or None when it holds no CIFAR-10."""
    path = Path(path).expanduser()
    if path.is_file():
        # An archive named directly (opening it checks what it really is); a lone batch file is not a source.
        return path if path.name.endswith((".tar.gz", ".tgz", ".tar")) else None
    if not path.is_dir():
        return None
    for folder in (path, *(path / spec["folder"] for spec in LAYOUTS.values())):
        if folder.is_dir() and layout_of(p.name for p in folder.iterdir()):
            return folder
    # Official names first (sorted, so the binary archive wins), then a renamed download.
    for archive in sorted(path.glob("cifar-10-*.tar.gz")):
        if archive.is_file():
            return archive
    return None


def locate_source(flag: str | None = None, *, download: bool = True, url: str | None = None,
                  md5: str | None = None, progress: bool = True) -> Path:
    """Return the CIFAR-10 folder or archive: the flag, LITENET_DATA, ./data, ../shared/data, else a download."""
    # A place the user named explicitly must hold the data: silently falling back to another copy
    # would train on something they did not ask for.
    for origin, value in (("--data", flag), ("LITENET_DATA", os.environ.get("LITENET_DATA"))):
        if value:
            found = find_in(Path(value))
            if found is None:
                raise LiteNetError(f"{origin}={value} holds no CIFAR-10: point it at a folder with "
                                   "cifar-10-batches-bin/ or cifar-10-batches-py/, or at the .tar.gz")
            return found.resolve()
    for place in DEFAULT_PLACES:
        found = find_in(place)
        if found is not None:
            return found.resolve()
    if not download:
        raise LiteNetError(f"CIFAR-10 not found ({searched()}): {WHERE_TO_PUT}")
    url, md5 = download_settings(url, md5)
    try:
        return fetch(url, md5, DEFAULT_PLACES[0], progress=progress).resolve()
    except LiteNetError as exc:  # offline, most often: say first where we looked
        raise LiteNetError(f"CIFAR-10 not found ({searched()}), and {exc}") from None


def searched() -> str:
    """The places looked at, each also as a full path: ../shared/data means nothing in a clone elsewhere."""
    shown = (p.as_posix() if p.as_posix().startswith(".") else f"./{p.as_posix()}" for p in DEFAULT_PLACES)
    places = ", ".join(f"{name} = {place.resolve()}" for name, place in zip(shown, DEFAULT_PLACES))
    return f"LITENET_DATA is not set; looked in {places}"
