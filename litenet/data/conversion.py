"""Convert a CIFAR-10 source into uint8 NHWC maps plus manifest.json, built in a temporary folder and renamed in."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from litenet.data import maps
from litenet.data.readers import CLASS_NAMES, IMAGE_SHAPE, LAYOUTS, RECORDS_PER_BATCH, parse_batch, parse_meta
from litenet.data.source import Source, open_source
from litenet.errors import LiteNetError, naming
from litenet.paths import check_reachable, make_folder


def plan(src: Source, allow_partial: bool = False) -> tuple[list[str], str]:
    """Pick the train batches (canonical order) and the test batch to convert; refuse incomplete sources."""
    spec = LAYOUTS[src.layout]
    train = [name for name in spec["train"] if src.has(name)]
    missing = [name for name in (*spec["train"], spec["test"]) if not src.has(name)]
    if not train or not src.has(spec["test"]):
        raise LiteNetError(f"{src.path}: missing {', '.join(missing)}; "
                           "at least one training batch and the test batch are needed")
    if missing and not allow_partial:
        raise LiteNetError(f"{src.path}: missing {', '.join(missing)}; add them, or pass --allow-partial "
                           "(allow_partial=True) to use only the batches present")
    return train, spec["test"]


class SplitWriter:
    """Appends the batches of one split to its images and labels files, hashing the bytes as they go."""

    def __init__(self, folder: Path, split: str):
        self.split, self.count = split, 0
        self.files = {kind: open(folder / maps.map_file(split, kind), "wb") for kind in maps.KINDS}
        self.hashes = {kind: hashlib.sha256() for kind in maps.KINDS}

    def append(self, images, labels) -> None:
        """Write one parsed batch (contiguous uint8 arrays) at the end of the split."""
        for kind, array in (("images", images), ("labels", labels)):
            self.files[kind].write(array.data)
            self.hashes[kind].update(array.data)
        self.count += len(labels)

    def finish(self) -> dict:
        """Flush both files to disk and return the split's manifest entry."""
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
        self.close()
        shapes = {"images": [self.count, *IMAGE_SHAPE], "labels": [self.count]}
        return {"count": self.count, **{kind: {"file": maps.map_file(self.split, kind), "shape": shapes[kind],
                                              "sha256": self.hashes[kind].hexdigest()} for kind in maps.KINDS}}

    def close(self) -> None:
        """Close both files (safe to call twice)."""
        for f in self.files.values():
            f.close()


def _describe(src: Source, name: str) -> str:
    """How error messages name a file of the source."""
    return str(src.path / name) if src.kind == "folder" else f"{name} in {src.path}"


def write_maps(src: Source, folder: Path, train: list[str], test: str, records: int | None,
               progress: bool = True) -> dict:
    """Parse the chosen batches and write the maps into `folder`; return the manifest's data fields."""
    meta = LAYOUTS[src.layout]["meta"]
    meta = meta if src.has(meta) else None  # optional: a reduced copy may leave it out
    order = [("train", name) for name in train] + [("test", test)]
    writers = {split: SplitWriter(folder, split) for split in maps.SPLITS}
    source_sha256, classes, pending = {}, CLASS_NAMES, {}
    try:
        with tqdm(total=len(order) + bool(meta), unit="file", desc="converting CIFAR-10",
                  disable=not progress, leave=False) as bar:
            # An archive yields its files in its own order; batches that arrive early wait in `pending`
            # so the train map is always batch 1, 2, ... whatever the source's order.
            for name, data in src.read_many([n for _, n in order] + ([meta] if meta else [])):
                source_sha256[name] = hashlib.sha256(data).hexdigest()
                if name == meta:
                    classes = parse_meta(src.layout, data, _describe(src, name))
                else:
                    pending[name] = parse_batch(src.layout, data, _describe(src, name), records)
                while order and order[0][1] in pending:
                    split, ready = order.pop(0)
                    writers[split].append(*pending.pop(ready))
                bar.update()
        splits = {split: writer.finish() for split, writer in writers.items()}
    finally:
        for writer in writers.values():
            writer.close()
    return {
        "classes": list(classes),
        "source": {"path": str(src.path.resolve()), "kind": src.kind, "layout": src.layout, "sha256": source_sha256},
        "train_batches": [int(re.search(r"\d+", name).group()) for name in train],
        "partial": len(train) < len(LAYOUTS[src.layout]["train"]),
        "splits": splits,
    }


def convert(source: Path, maps_dir: Path, *, allow_partial: bool = False,
            records_per_batch: int | None = RECORDS_PER_BATCH, progress: bool = True) -> dict:
    """Convert `source` (folder or archive) into `maps_dir` atomically and return the manifest."""
    maps_dir = Path(maps_dir)
    maps.check_replaceable(maps_dir)
    start = time.perf_counter()
    with open_source(source) as src:
        train, test = plan(src, allow_partial)
        make_folder(maps_dir.parent)
        check_reachable(maps_dir)
        # A hidden sibling on the same file system, so the final rename is atomic; without its
        # manifest it never looks like a maps folder even if this process is killed mid-write.
        tmp = Path(tempfile.mkdtemp(dir=maps_dir.parent, prefix=f".{maps_dir.name}.tmp-"))
        tmp.chmod(0o755)  # mkdtemp makes it private; the maps are meant to be shared read-only
        try:
            with naming(maps_dir):  # the maps are written in a hidden sibling, renamed when complete
                fields = write_maps(src, tmp, train, test, records_per_batch, progress)
            manifest = {"format": maps.FORMAT, "version": maps.VERSION, "dtype": "uint8", "layout": "NHWC",
                        **fields, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        "convert_seconds": round(time.perf_counter() - start, 3)}
            maps.write_manifest(tmp, manifest)
            maps.install(tmp, maps_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return manifest
