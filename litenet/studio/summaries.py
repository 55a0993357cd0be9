"""Tensors as the Studio's page receives them: statistics, histograms and small pictures, never whole tensors.

A training step of litenet-mixer-cpu holds tens of megabytes of activations and gradients; what crosses
to the browser is a few hundred numbers per op (a value under the cursor is fetched on request).
"""

from __future__ import annotations

import base64
import io

import numpy as np

HIST_BINS = 40
SAMPLE_VALUES = 1 << 15  # a histogram reads at most this many values: an even stride through the tensor
PICTURE_CELLS = 128  # a matrix picture has at most this many cells a side (larger matrices are averaged in blocks)


def per_image_norm(x: np.ndarray, batch: int) -> float:
    """‖x‖ over the whole batch / √batch: the norm one image's share of the tensor has on average."""
    flat = np.asarray(x).reshape(-1)
    return float(np.sqrt(np.dot(flat, flat) / max(batch, 1)))


def sample(x: np.ndarray) -> np.ndarray:
    """At most SAMPLE_VALUES of x's values, taken at an even stride (all of them for a small tensor)."""
    flat = np.asarray(x).reshape(-1)
    step = max(1, flat.size // SAMPLE_VALUES)
    return flat[::step]


def stats(x: np.ndarray) -> dict:
    """mean, std, min and max over every value (float64 sums, no float64 copy: a few passes over the
    tensor as it is), and the share of exact zeros in the histogram's sample."""
    values = np.asarray(x)
    flat = values.reshape(-1) if values.flags.c_contiguous else np.ascontiguousarray(values).reshape(-1)
    if flat.size == 0:
        return {"count": 0}
    mean = float(flat.sum(dtype=np.float64)) / flat.size
    square = float(np.dot(flat, flat)) / flat.size
    return {"count": int(flat.size), "mean": mean, "std": float(np.sqrt(max(square - mean * mean, 0.0))),
            "min": float(flat.min()), "max": float(flat.max()), "zeros": float(np.mean(sample(flat) == 0))}


def histogram(x: np.ndarray) -> dict:
    """HIST_BINS counts over [min, max] of a sample of x (sampled: SAMPLE_VALUES), and the bin edges' ends."""
    values = sample(x).astype(np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {"lo": 0.0, "hi": 0.0, "counts": []}
    lo, hi = float(values.min()), float(values.max())
    counts, _ = np.histogram(values, bins=HIST_BINS, range=(lo, hi if hi > lo else lo + 1.0))
    return {"lo": lo, "hi": hi, "counts": counts.tolist(), "sampled": int(values.size)}


def summary(x: np.ndarray) -> dict:
    """stats and histogram together: what the op inspector shows of one tensor."""
    return {"shape": list(np.shape(x)), **stats(x), "hist": histogram(x)}


def png_data_url(rgb: np.ndarray) -> str:
    """uint8 (H, W, 3) → a PNG data: URL (Pillow, part of the base install)."""
    from PIL import Image

    buffer = io.BytesIO()
    # compress_level 1: a picture of weights is noise to zlib; the default level costs milliseconds for a few percent
    Image.fromarray(np.ascontiguousarray(rgb, np.uint8)).save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def diverging(values: np.ndarray, limit: float | None = None) -> np.ndarray:
    """A (H, W) array → uint8 RGB: blue for negative, white for 0, red for positive, at ±limit (default max |v|)."""
    values = np.nan_to_num(np.asarray(values, np.float64))
    limit = limit or float(np.max(np.abs(values))) or 1.0
    t = np.clip(values / limit, -1.0, 1.0)[..., None]
    white, red, blue = np.array([255.0, 255, 255]), np.array([200.0, 30, 30]), np.array([30.0, 70, 200])
    rgb = np.where(t >= 0, white + t * (red - white), white - t * (blue - white))
    return rgb.astype(np.uint8)


def block_means(matrix: np.ndarray, cells: int = PICTURE_CELLS) -> tuple[np.ndarray, int, int]:
    """(the matrix averaged in blocks to at most `cells` a side, rows per block, columns per block); a matrix
    that fits is returned as it is. Blocks at the right and bottom edges may be partial: they average what
    they cover."""
    m = np.asarray(matrix, np.float64)
    if m.ndim == 1:
        m = m[None, :]
    rows, cols = -(-m.shape[0] // cells), -(-m.shape[1] // cells)
    if rows == cols == 1:
        return m, 1, 1
    pad = ((0, -m.shape[0] % rows), (0, -m.shape[1] % cols))
    grid = ((m.shape[0] + pad[0][1]) // rows, rows, (m.shape[1] + pad[1][1]) // cols, cols)
    sums = np.pad(m, pad).reshape(grid).sum(axis=(1, 3))
    counts = np.pad(np.ones(m.shape), pad).reshape(grid).sum(axis=(1, 3))
    return sums / counts, rows, cols


def matrix_picture(matrix: np.ndarray) -> dict:
    """A weight matrix as a picture: block means in the diverging colours, with what a pixel stands for."""
    means, rows, cols = block_means(matrix)
    shape = list(np.shape(matrix)) if np.ndim(matrix) == 2 else [1, int(np.size(matrix))]
    return {"png": png_data_url(diverging(means)), "shape": shape, "block": [rows, cols],
            "limit": float(np.max(np.abs(means))) if means.size else 0.0}


def image_url(image: np.ndarray) -> str:
    """A uint8 (32, 32, 3) image as a PNG data: URL (the page enlarges it without smoothing)."""
    return png_data_url(image)


def heat_url(image: np.ndarray, heat: np.ndarray) -> str:
    """A saliency map over the image: the image in grey, red where the map is positive, blue where negative,
    clipped at the 99th percentile of |map| (one hot pixel does not wash out the rest)."""
    limit = float(np.percentile(np.abs(heat), 99)) or 1.0
    colour = diverging(heat, limit).astype(np.float64)
    grey = np.repeat(np.asarray(image, np.float64).mean(axis=2, keepdims=True), 3, axis=2)
    strength = np.clip(np.abs(heat) / limit, 0, 1)[..., None]
    return png_data_url((grey * (1 - strength) + colour * strength).astype(np.uint8))
