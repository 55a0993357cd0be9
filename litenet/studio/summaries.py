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
    """mean, std, min, max and the share of exact zeros, over every value (float64 sums)."""
    values = np.asarray(x, np.float64).reshape(-1)
    if values.size == 0:
        return {"count": 0}
    return {"count": int(values.size), "mean": float(values.mean()), "std": float(values.std()),
            "min": float(values.min()), "max": float(values.max()), "zeros": float(np.mean(values == 0))}


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
    Image.fromarray(np.ascontiguousarray(rgb, np.uint8)).save(buffer, format="PNG")
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
    """(the matrix averaged in blocks to at most `cells` a side, rows per block, columns per block)."""
    m = np.asarray(matrix, np.float64)
    if m.ndim == 1:
        m = m[None, :]
    rows, cols = -(-m.shape[0] // cells), -(-m.shape[1] // cells)
    pad = ((0, -m.shape[0] % rows), (0, -m.shape[1] % cols))
    padded = np.pad(m, pad, constant_values=np.nan)
    blocks = padded.reshape(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)
    with np.errstate(invalid="ignore"):
        return np.nanmean(blocks, axis=(1, 3)), rows, cols


def matrix_picture(matrix: np.ndarray) -> dict:
    """A weight matrix as a picture: block means in the diverging colours, with what a pixel stands for."""
    means, rows, cols = block_means(matrix)
    shape = list(np.shape(matrix)) if np.ndim(matrix) == 2 else [1, int(np.size(matrix))]
    return {"png": png_data_url(diverging(means)), "shape": shape, "block": [rows, cols],
            "limit": float(np.max(np.abs(np.nan_to_num(means)))) if means.size else 0.0}


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
