"""Saliency maps: gradient × input for the predicted class, from the hand-written backward.

For image i with predicted class c, the map is Σ_k (x[i, :, :, k] − shift) · ∂z[i, c]/∂x[i, :, :, k]:
the first-order share of the logit z_c that each pixel contributes, measured from the input the
model reads as all zeros (black for the seed, mid-grey for presets with input_shift = 0.5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.model import ModelConfig
from litenet.train import network

def load_image(path: str | Path, info: dict | None = None) -> np.ndarray:
    """Any image file → uint8 (32, 32, 3) RGB, exactly as the inference runtime reads it.

    NOTE: delegates to litenet.runtime.images, so a saliency map explains the input that
    `litenet-infer` classifies: EXIF orientation applied, any mode to RGB (transparency on white,
    grey copied to the three colours), the largest centred square cropped, then the area average
    (BOX) when shrinking or BICUBIC when enlarging. `info`, when given, receives the file's own
    size and mode.
    """
    from PIL import Image

    from litenet.runtime.images import ImageError
    from litenet.runtime.images import load_image as runtime_load_image

    try:
        image = runtime_load_image(path)
    except ImageError as exc:
        raise LiteNetError(str(exc)) from None
    if info is not None:
        with Image.open(path) as img:  # the header only; the pixels were read above
            info.update(size=img.size, mode=img.mode)
    return image


def class_scores(z: np.ndarray, loss: str) -> tuple[np.ndarray, str]:
    """What to show as a class's score: softmax probabilities for cross-entropy models, raw logits
    for margin models (the seed has no softmax; its logits are the decision)."""
    if loss == "cross-entropy":
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), "probability"
    return z, "logit"


def saliency(params: np.ndarray, images: np.ndarray, model: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    """(logits (B, C), gradient × input maps (B, 32, 32)) for each image's predicted class.

    One backward with ∂L/∂z = onehot(predicted class) gives ∂z_pred/∂x for every image at once:
    LayerNorm works per image, so no image's gradient leaks into another's.
    """
    tape = network.forward(params, images, model)
    pred = tape.z.argmax(axis=1)
    dz = np.zeros_like(tape.z)
    dz[np.arange(len(pred)), pred] = 1.0
    _, dx, _ = network.backward(params, tape, dz, model, want_dx=True)
    inputs = tape.x - tape.x.dtype.type(model.input_shift)
    return tape.z.astype(np.float64), (inputs * dx).sum(axis=3).astype(np.float64)


def _heat_limit(maps: np.ndarray) -> float:
    """A symmetric colour limit: the 99th percentile of |map|, so one hot pixel does not wash out the rest."""
    limit = float(np.percentile(np.abs(maps), 99))
    return limit if limit > 0 else 1.0


HEAT_MEANING = "gradient × input: each pixel's first-order share of the class's logit"
RED_BLUE = "red raises the class's logit, blue lowers it"


def _draw_heat(ax, image: np.ndarray, heat: np.ndarray):
    """The map over the image in grey, red for + and blue for −, clipped at ±_heat_limit; returns the map's
    AxesImage (for a colour bar) and that limit."""
    grey = image.astype(np.float64).mean(axis=2)
    ax.imshow(grey, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
    limit = _heat_limit(heat)
    shown = ax.imshow(heat, cmap="bwr", vmin=-limit, vmax=limit, alpha=0.65, interpolation="nearest")
    ax.set_xticks([]), ax.set_yticks([])
    return shown, limit


def render_explanation(out_png: str | Path, image: np.ndarray, heat: np.ndarray, scores: np.ndarray,
                       score_kind: str, classes: list[str], title: str) -> bool:
    """One PNG: the image as the model sees it, the heat map over it with its colour scale, and the
    top-3 classes. False (after one notice) without matplotlib."""
    from litenet.atomic import atomic_path
    from litenet.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return False

    top = np.argsort(-scores)[:3]
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 4.2), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    fig.subplots_adjust(left=0.02, right=0.97, top=0.8, bottom=0.2, wspace=0.3)
    fig.suptitle(title, fontsize=10)
    axes[0].imshow(image, interpolation="nearest")
    axes[0].set_title("input (32 × 32)", fontsize=9)
    axes[0].set_xticks([]), axes[0].set_yticks([])
    shown, limit = _draw_heat(axes[1], image, heat)
    axes[1].set_title(f"gradient × input for '{classes[top[0]]}'\nred: for it, blue: against", fontsize=9)
    bar = fig.colorbar(shown, ax=axes[1], orientation="horizontal", fraction=0.06, pad=0.04)
    bar.set_ticks([-limit, 0, limit], labels=[f"−{limit:.2g}", "0", f"+{limit:.2g}"])
    bar.ax.tick_params(labelsize=7)
    bar.set_label(f"each pixel's share of the logit of '{classes[top[0]]}'\n(clipped at the 99th percentile of |map|)",
                  fontsize=7)
    ax = axes[2]
    values = scores[top]
    ax.barh(range(3)[::-1], values, color=["C3", "C7", "C7"])
    ax.set_yticks(range(3)[::-1], [classes[i] for i in top])
    ax.set_title(f"top 3 ({score_kind})", fontsize=9)
    if score_kind == "probability":
        ax.set_xlim(0, 1.0)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25 %", "50 %", "75 %", "100 %"], fontsize=8)
        for row, v in zip(range(3)[::-1], values):
            inside = v > 0.7  # a long bar carries its label inside, so nothing runs past 100 %
            ax.text(v - 0.02 if inside else v + 0.02, row, f"{100 * v:.1f} %", va="center", fontsize=8,
                    ha="right" if inside else "left", color="white" if inside else "black")
    else:
        span = max(abs(values).max(), 1e-6) * 1.4
        ax.set_xlim(min(0, values.min() * 1.4), span)
        for row, v in zip(range(3)[::-1], values):
            ax.text(v, row, f" {v:.3f}", va="center", fontsize=8)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True


def render_grid(out_png: str | Path, images: np.ndarray, maps: np.ndarray, pred: np.ndarray,
                labels: np.ndarray, classes: list[str], title: str, columns: int = 4) -> bool:
    """A labelled sheet: for each image, the image and its map, titled true → predicted, with a legend
    for the colours. False (after one notice) without matplotlib."""
    from litenet.atomic import atomic_path
    from litenet.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return False

    n = len(images)
    rows = -(-n // columns)
    height = 1.55 * rows + 1.0  # + the title above and the legend below
    fig, axes = plt.subplots(rows, 2 * columns, figsize=(2.1 * columns * 2 * 0.62, height), squeeze=False)
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.5 / height, bottom=0.5 / height,
                        wspace=0.05, hspace=0.35)
    fig.suptitle(title, fontsize=10)
    for ax in axes.ravel():
        ax.axis("off")
    for i in range(n):
        r, c = divmod(i, columns)
        a, b = axes[r, 2 * c], axes[r, 2 * c + 1]
        a.imshow(images[i], interpolation="nearest")
        _draw_heat(b, images[i], maps[i])
        b.axis("off")
        ok = pred[i] == labels[i]
        a.set_title(f"{classes[labels[i]]} → {classes[pred[i]]}", fontsize=7, color="black" if ok else "C3",
                    loc="left")
    fig.text(0.5, 0.18 / height,
             f"each image, then its map of {HEAT_MEANING} (predicted class; {RED_BLUE}; each map scaled to its "
             "own 99th percentile of |map|).\nCaption: true class → predicted class, black when right, red when wrong.",
             ha="center", va="bottom", fontsize=7, wrap=True)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True
