"""The maps folder on disk: file names, manifest.json checks, atomic install, and read-only memory maps."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from litenet.data.readers import CLASS_NAMES, IMAGE_SHAPE
from litenet.errors import LiteNetError

FORMAT = "litenet-cifar10-maps"
VERSION = 1
MANIFEST = "manifest.json"
SPLITS = ("train", "test")
KINDS = ("images", "labels")

# NOTE: raw .u8 files rather than .npy: the manifest already holds each shape, so a header would be a
# second copy that could disagree with it; raw bytes are also what a C/CUDA loader or `np.fromfile`
# reads with no parsing, and their sha256 is the hash of the pixels alone.


def map_file(split: str, kind: str) -> str:
    """The file name of one map, e.g. train_images.u8."""
    return f"{split}_{kind}.u8"


def maps_folder(maps: str | Path | None = None) -> Path:
    """Where the maps live: the argument, then LITENET_MAPS, then ./data/cifar10-maps."""
    return Path(maps or os.environ.get("LITENET_MAPS") or Path("data") / "cifar10-maps").expanduser()


def stale(maps_dir: Path, why: str) -> LiteNetError:
    """The one message for maps that exist but cannot be trusted."""
    return LiteNetError(f"maps at {maps_dir} are stale or corrupt ({why}); "
                        "run `litenet data --force` to rebuild them")


def read_manifest(maps_dir: Path) -> dict | None:
    """Load manifest.json, or return None when the folder has none (the maps are missing, not corrupt)."""
    path = Path(maps_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise stale(maps_dir, f"unreadable {MANIFEST}: {e}") from None
    if not isinstance(manifest, dict):
        raise stale(maps_dir, f"{MANIFEST} is not an object")
    return manifest


def _shape(manifest: dict, split: str, kind: str) -> tuple[int, ...]:
    """The shape the manifest records for one map, checked against what the format allows."""
    n = manifest["splits"][split]["count"]
    shape = tuple(manifest["splits"][split][kind]["shape"])
    expected = (n, *IMAGE_SHAPE) if kind == "images" else (n,)
    if shape != expected or n <= 0:
        raise ValueError(f"{split} {kind} shape {list(shape)}, expected {list(expected)}")
    return shape


def validate(maps_dir: Path, manifest: dict, verify: bool = False) -> dict[tuple[str, str], tuple[int, ...]]:
    """Check the manifest and each map's size (and, with verify, its sha256); return the shapes."""
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise stale(maps_dir, f"format {manifest.get('format')!r} version {manifest.get('version')!r}, "
                              f"this LiteNet reads {FORMAT!r} version {VERSION}")
    shapes = {}
    try:
        if manifest["dtype"] != "uint8" or len(manifest["classes"]) != len(CLASS_NAMES):
            raise ValueError(f"dtype {manifest['dtype']!r} with {len(manifest['classes'])} classes")
        for split in SPLITS:
            for kind in KINDS:
                shapes[split, kind] = shape = _shape(manifest, split, kind)
                path = Path(maps_dir) / map_file(split, kind)
                size = path.stat().st_size if path.is_file() else None
                if size != int(np.prod(shape)):
                    raise ValueError(f"{path.name} is {size} bytes, expected {int(np.prod(shape))}")
                if verify:
                    with open(path, "rb") as f:
                        digest = hashlib.file_digest(f, "sha256").hexdigest()
                    if digest != manifest["splits"][split][kind]["sha256"]:
                        raise ValueError(f"{path.name} does not match its sha256")
    except (KeyError, TypeError, ValueError) as e:
        raise stale(maps_dir, str(e) if isinstance(e, ValueError) else f"manifest lacks {e}") from None
    return shapes


def open_maps(maps_dir: Path, verify: bool = False) -> tuple[dict, dict[tuple[str, str], np.memmap]]:
    """Validate a maps folder and open every map read-only; raise (suggesting --force) if anything is off."""
    manifest = read_manifest(maps_dir)
    if manifest is None:
        raise stale(maps_dir, f"no {MANIFEST}")
    shapes = validate(maps_dir, manifest, verify)
    arrays = {key: np.memmap(Path(maps_dir) / map_file(*key), dtype=np.uint8, mode="r", shape=shape)
              for key, shape in shapes.items()}
    return manifest, arrays


def check_replaceable(target: Path) -> None:
    """Refuse to overwrite anything but an empty folder or an earlier maps folder."""
    if target.exists() and not target.is_dir():
        raise LiteNetError(f"{target} is a file, not a maps folder; choose another --maps")
    if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise LiteNetError(f"{target} is not empty and is not a LiteNet maps folder; choose another --maps")


def fsync_path(path: Path) -> None:
    """Flush a file's or a folder's entry to disk, so a rename after it cannot outrun the data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(folder: Path, manifest: dict) -> None:
    """Write manifest.json, flushed to disk; it is written last, so a folder without it is never valid."""
    path = Path(folder) / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    fsync_path(path)


def install(tmp: Path, target: Path) -> None:
    """Move a finished temporary maps folder into place with renames, replacing any earlier maps."""
    fsync_path(tmp)
    if target.exists():
        # rename() cannot replace a non-empty folder: move the old one aside first. A crash between the
        # two renames leaves no maps at all, which the next run treats as missing and rebuilds.
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, target)
    fsync_path(target.parent)
