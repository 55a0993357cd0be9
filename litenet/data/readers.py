"""Parsers for the two published CIFAR-10 layouts (binary records and Python pickles) into uint8 NHWC."""

from __future__ import annotations

import io
import pickle

import numpy as np

from litenet.errors import LiteNetError
from litenet.limits import MAX_BATCH_FILE_BYTES

CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
RECORDS_PER_BATCH = 10_000
IMAGE_SHAPE = (32, 32, 3)
PIXELS = 32 * 32 * 3
RECORD_BYTES = 1 + PIXELS  # one label byte, then R, G and B planes of 32x32 each

# The file names of each layout; the train batches are listed in their canonical order.
LAYOUTS = {
    "binary": {
        "train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
        "test": "test_batch.bin",
        "meta": "batches.meta.txt",
        "folder": "cifar-10-batches-bin",
    },
    "python": {
        "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
        "test": "test_batch",
        "meta": "batches.meta",
        "folder": "cifar-10-batches-py",
    },
}


def check_batch_size(where, size: int, regular: bool = True) -> None:
    """Refuse, before reading it, a batch file that cannot be CIFAR-10 by its size (or is not a regular file)."""
    if not regular:
        raise LiteNetError(f"{where}: not a regular file (a FIFO, socket or device); use the official batch files")
    if size > MAX_BATCH_FILE_BYTES:
        raise LiteNetError(f"{where}: {size:,} bytes, more than any CIFAR-10 batch file "
                           f"(limit {MAX_BATCH_FILE_BYTES:,}); use the official files")


def layout_of(names) -> str | None:
    """Say which layout a set of file names belongs to; binary wins when both are present (no pickles to load)."""
    names = set(names)
    for layout in ("binary", "python"):
        spec = LAYOUTS[layout]
        if names & {*spec["train"], spec["test"]}:
            return layout
    return None


try:
    from numpy._core.multiarray import _reconstruct  # numpy >= 2
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct

# Exactly the globals an official cifar-10-batches-py pickle references (written by Python 2 with
# numpy 1.x); numpy 2 renamed numpy.core to numpy._core, so both spellings map to the same function.
# We return the objects ourselves instead of importing by name: importing numpy.core warns on numpy 2.
def _latin1_bytes(text, encoding="latin1"):
    """What a protocol-2 pickle written by Python 3 calls to rebuild a bytes object: `_codecs.encode(s, "latin1")`.
    Only that: another codec (zlib_codec, say) could inflate a few bytes into gigabytes."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise RefusedPickle(f"refused _codecs.encode with {encoding!r}")
    return text.encode("latin1")


def _frombuffer(buffer, dtype, shape, order):
    """numpy's own protocol-5 array rebuild, with its arguments checked."""
    if not isinstance(buffer, (bytes, bytearray, memoryview)) or not isinstance(dtype, np.dtype) or order not in ("C", "F"):
        raise RefusedPickle("refused a malformed array")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape, order=order)


# The official pickles were written by Python 2; re-pickled copies from Python 3 use protocol 2
# (bytes as _codecs.encode), 3-4 (the same numpy globals) or 5 (numpy's _frombuffer).
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_bytes,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
}


class RefusedPickle(pickle.UnpicklingError):
    """A pickle asked for something outside the allow-list."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that can build dicts, lists, strings and numpy arrays, and nothing that runs code."""

    def find_class(self, module, name):
        """Resolve only the allow-listed numpy globals; refuse everything else before it is imported."""
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise RefusedPickle(f"refused global {module}.{name}") from None

    def persistent_load(self, pid):
        """Refuse persistent ids: CIFAR pickles have none, and they are another way to inject objects."""
        raise RefusedPickle("refused persistent id")


def safe_unpickle(data: bytes, name: str):
    """Unpickle CIFAR bytes with the restricted unpickler; any failure is a LiteNetError naming the file."""
    try:
        # encoding="bytes" is what the dataset's authors document for these Python 2 pickles:
        # their str keys and pixel buffers come back as bytes.
        return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    except RefusedPickle as e:
        raise LiteNetError(f"{name}: not a CIFAR-10 pickle ({e}); use the official cifar-10-python files") from None
    except Exception as e:  # truncated or garbled pickles raise EOFError, ValueError, TypeError, ...
        raise LiteNetError(f"{name}: truncated or corrupt pickle ({type(e).__name__}: {e}); "
                           "replace it with a fresh copy") from None


def _check_count(n: int, name: str, records: int | None) -> None:
    """Reject empty batches and, when a size is expected, batches of any other size."""
    if n == 0:
        raise LiteNetError(f"{name}: holds no records; replace it with a fresh copy")
    if records is not None and n != records:
        raise LiteNetError(f"{name}: holds {n} records, expected {records}; replace it with a fresh copy")


def _check_labels(labels: np.ndarray, name: str) -> None:
    """Reject labels outside 0..9, which would silently index past the 10 classes."""
    bad = np.flatnonzero(labels >= len(CLASS_NAMES))
    if bad.size:
        raise LiteNetError(f"{name}: record {bad[0]} has label {labels[bad[0]]}, labels must be 0-9; "
                           "the file is corrupt or not CIFAR-10")


def planar_to_nhwc(planar: np.ndarray) -> np.ndarray:
    """Turn (N, 3072) channel-planar rows (R plane, G plane, B plane, each 32x32 row-major) into (N, 32, 32, 3)."""
    planes = planar.reshape(-1, 3, 32 * 32)
    nhwc = np.empty((len(planes), 32 * 32, 3), dtype=planar.dtype)
    for c in range(3):  # x[n, h, w, c] = plane_c[n, 32 h + w]; per plane, as a 4-D transpose copy is 2x slower
        nhwc[:, :, c] = planes[:, c]
    return nhwc.reshape(-1, *IMAGE_SHAPE)


def parse_binary_batch(data: bytes, name: str, records: int | None = RECORDS_PER_BATCH):
    """Parse a binary-layout batch (records of 1 label byte + 3072 pixel bytes) into (images NHWC, labels)."""
    if len(data) % RECORD_BYTES:
        raise LiteNetError(f"{name}: {len(data)} bytes is not a whole number of {RECORD_BYTES}-byte records; "
                           "the file is truncated or not the CIFAR-10 binary version")
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    _check_count(len(rows), name, records)
    labels = rows[:, 0].copy()
    _check_labels(labels, name)
    return planar_to_nhwc(rows[:, 1:]), labels


def _key(d: dict, key: str):
    """Look up a key written as Python 2 str (bytes here) or, in re-pickled copies, as a Python 3 str."""
    for k in (key.encode(), key):
        if k in d:
            return d[k]
    raise KeyError(key)


def parse_python_batch(data: bytes, name: str, records: int | None = RECORDS_PER_BATCH):
    """Parse a Python-layout batch (pickled dict with b'data' (N, 3072) uint8 and b'labels') into (images, labels)."""
    batch = safe_unpickle(data, name)
    try:
        pixels, labels = _key(batch, "data"), _key(batch, "labels")
    except (KeyError, TypeError):
        raise LiteNetError(f"{name}: not a CIFAR-10 batch (no data/labels entries); "
                           "use the official cifar-10-python files") from None
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 2 \
            or pixels.shape[1] != PIXELS:
        shape = getattr(pixels, "shape", type(pixels).__name__)
        raise LiteNetError(f"{name}: data is {shape} {getattr(pixels, 'dtype', '')}, expected (N, {PIXELS}) uint8; "
                           "the file is corrupt or not CIFAR-10")
    try:
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise LiteNetError(f"{name}: labels are not a list of integers; the file is corrupt") from None
    if len(labels) != len(pixels):
        raise LiteNetError(f"{name}: {len(pixels)} images but {len(labels)} labels; the file is corrupt")
    _check_count(len(pixels), name, records)
    if labels.size and labels.min() < 0:
        raise LiteNetError(f"{name}: negative label {labels.min()}; the file is corrupt or not CIFAR-10")
    _check_labels(labels, name)
    return planar_to_nhwc(pixels), labels.astype(np.uint8)


def parse_batch(layout: str, data: bytes, name: str, records: int | None = RECORDS_PER_BATCH):
    """Parse one batch file of the given layout ('binary' or 'python')."""
    parse = parse_binary_batch if layout == "binary" else parse_python_batch
    return parse(data, name, records)


def parse_meta(layout: str, data: bytes, name: str) -> tuple[str, ...]:
    """Read the class names from batches.meta.txt or batches.meta and check they are CIFAR-10's."""
    if layout == "binary":
        try:
            names = tuple(line.strip() for line in data.decode("ascii").splitlines() if line.strip())
        except UnicodeDecodeError:
            raise LiteNetError(f"{name}: not a text list of class names; the file is corrupt") from None
    else:
        meta = safe_unpickle(data, name)
        try:
            raw = _key(meta, "label_names")
            names = tuple(n.decode("ascii") if isinstance(n, bytes) else str(n) for n in raw)
        except (KeyError, TypeError, UnicodeDecodeError):
            raise LiteNetError(f"{name}: no label_names list; the file is corrupt") from None
    if names != CLASS_NAMES:
        raise LiteNetError(f"{name}: class names {list(names)} are not CIFAR-10's; point --data at CIFAR-10")
    return names
