"""Int8 calibration in NumPy: a histogram of |x| for every quantized tensor, and three ways to pick its range.

Every MatMul input (litenet.export.onnx_graph.matmul_inputs) is quantized per tensor and
symmetrically, so a calibration only has to choose one number per tensor, amax, and the scale is
amax / 127. The histograms come from the one NumPy forward (litenet.forward, the op list) on
training images, so what is measured is exactly what the model computes.

  minmax      amax = max |x|: nothing clips, but one outlier stretches every step.
  percentile  amax = the p-th percentile of |x| (default 99.99): the rare tail clips.
  entropy     TensorRT's KL method: the amax whose 128-level quantized histogram loses the least
              information (Kullback–Leibler divergence) against the clipped reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet.errors import LiteNetError
from litenet.export.onnx_graph import matmul_inputs
from litenet import forward
from litenet.graph import ops_of
from litenet.model import AnyModel, param_views

METHODS = ("minmax", "percentile", "entropy")
DEFAULT_PERCENTILE = 99.99
BINS = 2048  # TensorRT's histogram size
LEVELS = 128  # magnitudes 0…127: one side of symmetric int8
QMAX = 127


@dataclass
class Histogram:
    """Counts of |x| in BINS equal bins over [0, amax] for one tensor."""

    counts: np.ndarray  # (BINS,) int64
    amax: float  # max |x| seen, the right edge of the last bin

    @property
    def bin_width(self) -> float:
        """amax / BINS."""
        return self.amax / len(self.counts)


def activations(params: np.ndarray, model: AnyModel, images: np.ndarray) -> dict[str, np.ndarray]:
    """The float32 input of every MatMul for a batch of uint8 images, by tensor name ("<op>.input")."""
    views = param_views(np.asarray(params, np.float32), model)
    product, acts = forward.float_product(views), {}

    def recording(op, x):
        acts[f"{op.name}.input"] = x
        return product(op, x)

    forward.run(ops_of(model), views, images, product=recording)
    return acts


def collect_histograms(params: np.ndarray, model: AnyModel, images: np.ndarray,
                       batch_size: int = 512) -> dict[str, Histogram]:
    """Two passes over the images: the first finds each tensor's max |x|, the second bins |x| under it."""
    names = [a for a, _ in matmul_inputs(model)]
    params = np.asarray(params, np.float32)
    batches = [images[i:i + batch_size] for i in range(0, len(images), batch_size)]
    amax = dict.fromkeys(names, 0.0)
    for batch in batches:
        for name, x in activations(params, model, batch).items():
            amax[name] = max(amax[name], float(np.abs(x).max()))
    counts = {name: np.zeros(BINS, np.int64) for name in names}
    for batch in batches:
        for name, x in activations(params, model, batch).items():
            # An all-zero tensor still gets a valid range; its histogram is a spike at 0.
            counts[name] += np.histogram(np.abs(x), bins=BINS, range=(0.0, amax[name] or 1.0))[0]
    return {name: Histogram(counts[name], amax[name]) for name in names}


def amax_minmax(hist: Histogram) -> float:
    """The largest |x| seen: nothing is clipped."""
    return hist.amax


def amax_percentile(hist: Histogram, percentile: float = DEFAULT_PERCENTILE) -> float:
    """The right edge of the first bin where the cumulative share of |x| reaches `percentile` %."""
    if not 0 < percentile <= 100:
        raise LiteNetError(f"percentile must be in (0, 100], got {percentile}")
    cdf = np.cumsum(hist.counts) / max(1, hist.counts.sum())
    index = int(np.searchsorted(cdf, percentile / 100.0 - 1e-12))  # tolerate cdf rounding at 100 %
    return min(index + 1, len(hist.counts)) * hist.bin_width


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Σ p log(p / q) over p > 0, both normalised first; q is smoothed where p > 0 but q = 0."""
    p = p / p.sum()
    q = np.where((q == 0) & (p > 0), 1e-12, q)  # the clipped outliers can land in an empty bin
    q = q / q.sum()
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def quantized_reference(counts: np.ndarray, levels: int = LEVELS) -> np.ndarray:
    """Merge `counts` into `levels` equal groups, then spread each group's total evenly over its
    non-empty bins: the histogram as 128 int8 levels would reproduce it."""
    i = len(counts)
    group = np.arange(i) * levels // i  # bin → the quantization level that represents it
    totals = np.bincount(group, weights=counts, minlength=levels)
    nonzero = np.bincount(group, weights=(counts > 0).astype(np.float64), minlength=levels)
    share = np.divide(totals, nonzero, out=np.zeros(levels), where=nonzero > 0)
    return np.where(counts > 0, share[group], 0.0)


def amax_entropy(hist: Histogram, levels: int = LEVELS) -> float:
    """TensorRT's entropy calibration: try every clip point i ≥ 128 bins, keep the least KL.

    Reference P: the first i bins with everything beyond folded into bin i−1 (clipping keeps
    those values, at the edge). Candidate Q: the first i bins as `levels` int8 steps would
    represent them. amax is the right edge of bin i−1.
    """
    counts = hist.counts.astype(np.float64)
    if counts.sum() == 0 or hist.amax == 0:
        return hist.amax
    tail = np.cumsum(counts[::-1])[::-1]  # tail[i] = Σ counts[i:]
    best_i, best_kl = len(counts), np.inf
    for i in range(levels, len(counts) + 1):
        p = counts[:i].copy()
        if i < len(counts):
            p[i - 1] += tail[i]
        if p.sum() == 0:
            continue
        kl = kl_divergence(p, quantized_reference(counts[:i], levels))
        if kl < best_kl:  # strict: ties keep the smaller range
            best_i, best_kl = i, kl
    return best_i * hist.bin_width


def choose_amax(hist: Histogram, method: str, percentile: float = DEFAULT_PERCENTILE) -> float:
    """The range of one tensor under a calibration method."""
    if method == "minmax":
        return amax_minmax(hist)
    if method == "percentile":
        return amax_percentile(hist, percentile)
    if method == "entropy":
        return amax_entropy(hist)
    raise LiteNetError(f"unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")


def scale_from_amax(amax: float) -> float:
    """s = amax / 127 as float32, so ±amax maps to ±127; a tensor that is always 0 gets s = 1."""
    return float(np.float32(amax) / np.float32(QMAX)) if amax > 0 else 1.0


def calibration_images(train_images: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """`count` training images drawn without replacement by a seeded generator, in index order."""
    if count < 1:
        raise LiteNetError(f"--calib must be at least 1 image, got {count}")
    count = min(count, len(train_images))
    index = np.sort(np.random.default_rng(seed).choice(len(train_images), size=count, replace=False))
    return np.asarray(train_images[index])
