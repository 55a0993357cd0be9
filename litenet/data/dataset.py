"""`open_cifar10`: locate the data, convert it once, and hand back read-only memory-mapped splits."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet.data.conversion import convert
from litenet.data.locate import locate_source
from litenet.data.maps import maps_folder, open_maps, read_manifest
from litenet.data.readers import RECORDS_PER_BATCH
from litenet.errors import LiteNetError


@dataclass(frozen=True)
class Split:
    """One split: uint8 images (N, 32, 32, 3) and uint8 labels (N,), both read-only."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class Cifar10:
    """The opened data set: train and test splits, class names, the manifest, and where the maps are."""

    train: Split
    test: Split
    classes: tuple[str, ...]
    manifest: dict
    path: Path
    converted: bool  # whether this call built the maps (the CLI reports the conversion time then)


def _check_same_source(maps_dir: Path, manifest: dict, data: str, origin: str = "--data") -> None:
    """Refuse maps built from another source than the one the caller named explicitly (--data or LITENET_DATA)."""
    wanted = str(locate_source(data if origin == "--data" else None, download=False))  # errors name the origin
    built_from = manifest.get("source", {}).get("path")
    if built_from != wanted:
        also = ", or unset LITENET_DATA" if origin == "LITENET_DATA" else ""
        raise LiteNetError(f"maps at {maps_dir} were built from {built_from}, not {wanted}; "
                           f"run `litenet data --force --data {data}` to rebuild them (or choose another --maps{also})")


def open_cifar10(data: str | Path | None = None, maps: str | Path | None = None, download: bool = True,
                 progress: bool = True, *, allow_partial: bool = False, force: bool = False,
                 verify: bool = False, records_per_batch: int | None = RECORDS_PER_BATCH,
                 url: str | None = None, md5: str | None = None) -> Cifar10:
    """Open CIFAR-10 from its maps, converting the located source first when the maps are missing (or `force`)."""
    maps_dir = maps_folder(maps)
    manifest = None if force else read_manifest(maps_dir)
    converted = manifest is None
    named = os.environ.get("LITENET_DATA") if data is None else data  # a place the user named is honoured
    if not converted and named:
        _check_same_source(maps_dir, manifest, str(named), "--data" if data is not None else "LITENET_DATA")
    elif converted:
        source = locate_source(None if data is None else str(data), download=download, url=url, md5=md5,
                               progress=progress)
        convert(source, maps_dir, allow_partial=allow_partial, records_per_batch=records_per_batch,
                progress=progress)
    manifest, arrays = open_maps(maps_dir, verify=verify)
    if manifest.get("partial") and not allow_partial:
        raise LiteNetError(f"maps at {maps_dir} hold only training batches {manifest['train_batches']}; "
                           "pass --allow-partial (allow_partial=True), or rebuild from the full data "
                           "with `litenet data --force`")
    return Cifar10(
        train=Split(arrays["train", "images"], arrays["train", "labels"]),
        test=Split(arrays["test", "images"], arrays["test", "labels"]),
        classes=tuple(manifest["classes"]),
        manifest=manifest,
        path=maps_dir.resolve(),
        converted=converted,
    )
