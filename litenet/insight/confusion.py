"""Confusion matrix, per-class accuracy, and their text and picture forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litenet.model import ModelConfig
from litenet.train import network


def predict(params: np.ndarray, images: np.ndarray, model: ModelConfig, batch: int = 1000) -> np.ndarray:
    """Predicted class of every image (argmax of the logits), the forward run in slices."""
    return np.concatenate([network.forward(params, np.asarray(images[i:i + batch]), model).z.argmax(axis=1)
                           for i in range(0, len(images), batch)]) if len(images) else np.zeros(0, np.int64)


def confusion_matrix(labels: np.ndarray, pred: np.ndarray, classes: int) -> np.ndarray:
    """Counts m[t, p] of images of true class t predicted as p."""
    m = np.zeros((classes, classes), np.int64)
    np.add.at(m, (np.asarray(labels, np.int64), np.asarray(pred, np.int64)), 1)
    return m


def per_class_accuracy(m: np.ndarray) -> np.ndarray:
    """Recall of each class: m[t, t] / Σ_p m[t, p]; NaN for a class with no images."""
    totals = m.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, np.diag(m) / totals, np.nan)


def report_text(m: np.ndarray, classes: list[str]) -> str:
    """Accuracy, per-class accuracy and the matrix as aligned text (rows: true, columns: predicted)."""
    total = int(m.sum())
    acc = np.trace(m) / total if total else float("nan")
    lines = [f"test accuracy {100 * acc:.2f}% ({int(np.trace(m))}/{total})", "", "per class:"]
    for name, a, n in zip(classes, per_class_accuracy(m), m.sum(axis=1)):
        lines.append(f"  {name:<11} {100 * a:6.2f}%  ({n} images)")
    width = max(5, len(str(m.max())) + 1)
    short = [c[:width - 1] for c in classes]
    lines += ["", "confusion matrix (rows: true class, columns: predicted):",
              " " * 12 + "".join(f"{s:>{width}}" for s in short)]
    for name, row in zip(classes, m):
        lines.append(f"  {name:<10}" + "".join(f"{v:>{width}}" for v in row))
    return "\n".join(lines)


def render_confusion(out_png: str | Path, m: np.ndarray, classes: list[str], title: str) -> bool:
    """The matrix as a picture: colour is the share of the true class's images, text the count.
    False (after one notice) without matplotlib."""
    from litenet.atomic import atomic_path
    from litenet.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return False

    totals = np.maximum(m.sum(axis=1, keepdims=True), 1)
    share = m / totals
    fig, ax = plt.subplots(figsize=(7.5, 6.5))
    fig.subplots_adjust(left=0.17, right=0.97, top=0.9, bottom=0.17)
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for t in range(len(classes)):
        for p in range(len(classes)):
            ax.text(p, t, str(m[t, p]), ha="center", va="center", fontsize=8,
                    color="white" if share[t, p] > 0.5 else "black")
    acc = per_class_accuracy(m)
    ax.set_xticks(range(len(classes)), classes, rotation=45, ha="right")
    ax.set_yticks(range(len(classes)), [f"{c} {100 * a:.0f}%" for c, a in zip(classes, acc)])
    ax.set(xlabel="predicted", ylabel="true class (its accuracy)", title=title)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True
