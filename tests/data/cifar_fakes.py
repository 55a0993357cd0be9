"""Builders of tiny synthetic CIFAR-10 batches in both published layouts, as folders and as .tar.gz archives."""

from __future__ import annotations

import io
import pickle
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet.data import CLASS_NAMES

RECORDS = 5  # records per synthetic batch: enough to tell records apart, small enough to be instant


@dataclass
class FakeCifar:
    """Synthetic data: five train batches and a test batch of (images NHWC, labels)."""

    train: list[tuple[np.ndarray, np.ndarray]]
    test: tuple[np.ndarray, np.ndarray]

    def train_images(self, batches=range(1, 6)):
        return np.concatenate([self.train[i - 1][0] for i in batches])

    def train_labels(self, batches=range(1, 6)):
        return np.concatenate([self.train[i - 1][1] for i in batches])


def make_fake(records: int = RECORDS, seed: int = 0) -> FakeCifar:
    """Random uint8 images and labels 0-9, distinct per batch."""
    rng = np.random.default_rng(seed)

    def batch():
        return (rng.integers(0, 256, (records, 32, 32, 3), dtype=np.uint8),
                rng.integers(0, 10, records, dtype=np.uint8))

    return FakeCifar(train=[batch() for _ in range(5)], test=batch())


def to_planar(images: np.ndarray) -> np.ndarray:
    """NHWC -> (N, 3072) channel-planar rows, the inverse of what the readers do (written independently)."""
    return np.stack([images[..., c].reshape(len(images), -1) for c in range(3)], axis=1).reshape(len(images), -1)


def binary_bytes(images, labels) -> bytes:
    """One binary-layout batch: a label byte then 3072 planar pixel bytes per record."""
    return np.concatenate([labels[:, None].astype(np.uint8), to_planar(images)], axis=1).tobytes()


class Py2StylePickler(pickle._Pickler):
    """Writes str and bytes as Python 2 `str` (BINSTRING), as the official cifar-10-batches-py files were."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj):
        data = obj.encode("latin1") if isinstance(obj, str) else obj
        self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[str] = save_py2_str
    dispatch[bytes] = save_py2_str


def py2_pickle(obj, numpy_module: str = "numpy.core.multiarray") -> bytes:
    """Pickle like the official files: protocol 2, Python 2 strings, numpy 1.x's module name for _reconstruct."""
    out = io.BytesIO()
    Py2StylePickler(out, protocol=2).dump(obj)
    return out.getvalue().replace(b"numpy._core.multiarray", numpy_module.encode())


def python_bytes(images, labels, numpy_module: str = "numpy.core.multiarray") -> bytes:
    """One Python-layout batch: a pickled dict with 'data' (N, 3072) uint8 and 'labels' (list of int)."""
    return py2_pickle({"batch_label": "batch", "labels": [int(x) for x in labels],
                       "data": to_planar(images), "filenames": ["x.png"] * len(labels)}, numpy_module)


def write_layout(folder: Path, fake: FakeCifar, layout: str = "binary", batches=range(1, 6),
                 test: bool = True, meta: bool = True) -> Path:
    """Write the chosen batches of `fake` into `folder` in one layout; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    ext, encode = (".bin", binary_bytes) if layout == "binary" else ("", python_bytes)
    for i in batches:
        (folder / f"data_batch_{i}{ext}").write_bytes(encode(*fake.train[i - 1]))
    if test:
        (folder / f"test_batch{ext}").write_bytes(encode(*fake.test))
    if meta and layout == "binary":
        (folder / "batches.meta.txt").write_text("\n".join(CLASS_NAMES) + "\n\n")
    elif meta:
        (folder / "batches.meta").write_bytes(py2_pickle({"label_names": list(CLASS_NAMES),
                                                          "num_vis": 3072, "num_cases_per_batch": RECORDS}))
    return folder


def make_archive(path: Path, folder: Path, order=None) -> Path:
    """Pack `folder` as <folder.name>/<file> members into a .tar.gz, in `order` (file names) if given."""
    names = order or sorted(p.name for p in folder.iterdir())
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, recursive=False)
        for name in names:
            tar.add(folder / name, arcname=f"{folder.name}/{name}")
    return path
