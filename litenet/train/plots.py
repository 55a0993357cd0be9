"""The training figures from metrics.jsonl: curves (loss, accuracy, gradient norm, lr) and gradient flow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litenet.atomic import atomic_path
from litenet.plotting import pyplot
# NOTE: the measures live in litenet.train.monitors (pure NumPy), so the docs, the tests and the
# figures share one definition of each.
from litenet.train import monitors
from litenet.train.monitors import RunLog, read_run


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average, so the curve of a noisy per-step value can be read."""
    if len(values) < 2 or window <= 1:
        return values
    window = min(window, len(values))
    kernel = np.ones(window) / window
    head = np.cumsum(values[:window - 1]) / np.arange(1, window)
    return np.concatenate([head, np.convolve(values, kernel, mode="valid")])


# Points a figure draws per line: a panel is about 500 pixels wide, and drawing the Mixer's 39,000 steps
# for each of 51 layers took seconds of every redraw.
LINE_POINTS = 1000


def thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th point of a curve smoothed over many more than k steps: the same line from fewer points."""
    stride = max(1, len(x) // LINE_POINTS)
    return x[::stride], y[::stride]


def draw_per_step(ax, x: np.ndarray, y: np.ndarray, **style) -> None:
    """A noisy per-step series: the line itself while it is short, else its range (min to max) over
    bins of steps, which covers the same pixels as the dense line."""
    bins = len(x) // LINE_POINTS
    if bins < 2:
        ax.plot(x, y, lw=0.5, **style)
        return
    cut = len(x) // bins * bins
    ax.fill_between(x[:cut:bins], y[:cut].reshape(-1, bins).min(axis=1), y[:cut].reshape(-1, bins).max(axis=1),
                    lw=0, **style)


def plot_training(run: RunLog | str | Path, out_png: str | Path) -> bool:
    """Draw the four panels from a run (or its metrics.jsonl) and write the PNG atomically; False (after
    one notice) without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False

    run = run if isinstance(run, RunLog) else read_run(run)
    epochs, x = run.epochs, run.step
    window = max(1, len(x) // 200)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.95, bottom=0.08, wspace=0.2, hspace=0.3)
    ax = axes[0, 0]
    loss = run.loss
    if window > 1:
        draw_per_step(ax, x, loss, color="0.8", label="per step")
        ax.plot(*thin(x, smooth(loss, window)), color="C0", label=f"running mean over {window} steps")
    else:  # too few steps to smooth
        ax.plot(x, loss, color="C0", label="per step")
    if epochs:
        ax.plot([r["step"] for r in epochs], [r["test_loss"] for r in epochs], "o-", color="C3", label="test")
    ax.set(title="loss", xlabel="step")
    ax.legend()
    ax = axes[0, 1]
    if epochs:
        e = [r["epoch"] + 1 for r in epochs]
        ax.plot(e, [100 * r["train_accuracy"] for r in epochs], "o-", label="train (first 10,000)")
        ax.plot(e, [100 * r["test_accuracy"] for r in epochs], "o-", label="test")
        ax.legend()
    ax.set(title="accuracy (%)", xlabel="epoch")
    ax = axes[1, 0]
    norm = run.grad_norm
    ax.set_yscale("log")
    draw_per_step(ax, x, norm, color="0.8")
    ax.plot(*thin(x, smooth(norm, window)), color="C2",
                label="‖g‖ before clipping" + (f", running mean over {window} steps" if window > 1 else ""))
    clipped = run.clipped
    if clipped.any():
        ax.plot(x[clipped], norm[clipped], "x", color="C3", ms=3, label=f"clipped ({clipped.sum()} steps)")
    ax.set(title="global gradient norm", xlabel="step")
    ax.legend()
    ax = axes[1, 1]
    ax.plot(*thin(x, run.lr), color="C4")
    ax.set(title="learning rate", xlabel="step")
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True


def plot_gradients(run: RunLog | str | Path, out_png: str | Path) -> bool:
    """Draw gradient flow from a run (or its metrics.jsonl): per-layer gradient norms, update ratios,
    residual path shares, clip rate; False (after one notice) without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False

    run = run if isinstance(run, RunLog) else read_run(run)
    window = max(1, len(run.step) // 200)
    layers = monitors.layer_tensors(run.params)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.95, bottom=0.08, wspace=0.2, hspace=0.3)
    # NOTE: past ten layers a legend covers the lines it names; the colour then runs along the depth.
    many = len(layers) > 10
    colour = ((lambda n: plt.cm.viridis(n / max(1, len(layers) - 1))) if many else (lambda n: f"C{n % 10}"))
    depth_note = f" — colour: first layer (purple) to last (yellow), {len(layers)} layers" if many else ""
    ax = axes[0, 0]
    for n, (i, label) in enumerate(layers):
        ax.semilogy(*thin(run.step, smooth(run.grad_norms[:, i], window)), color=colour(n), label=label)
    ax.set(title="gradient norm per layer" + (f" (running mean over {window} steps)" if window > 1 else ""),
           xlabel="step")
    if many:
        ax.text(0.01, 0.01, depth_note.lstrip(" —"), transform=ax.transAxes, fontsize=7, va="bottom")
    else:
        ax.legend(fontsize=7, ncol=2)
    ax = axes[0, 1]
    if len(run.chunk_step):
        # only full-length chunks: the short one ending an epoch reads higher (fewer steps to cancel)
        full = run.chunk_len == run.chunk_len.max()
        ratio = monitors.per_step_update_ratio(run)[full]
        for n, (i, label) in enumerate(layers):
            ax.semilogy(run.chunk_step[full], ratio[:, i], color=colour(n), label=label)
        ax.axhline(1e-3, color="0.5", ls=":", lw=1)
    ax.set(title="update ratio ‖Δw‖ / (k ‖w‖), per chunk of k steps", xlabel="step")
    ax = axes[1, 0]
    shares = monitors.path_shares(run.path)
    # a Mixer block holds two residuals (across patches, across channels): name each as the op list does
    names = run.residuals if len(run.residuals) == run.blocks else [f"residual {b}" for b in range(run.blocks)]
    for b in range(run.blocks):
        ax.plot(*thin(run.step, smooth(shares["side_norm"][:, b], window)), color=f"C{b % 10}",
                label=f"{names[b]}: √S / (√S + √M)")
        ax.plot(*thin(run.step, smooth(shares["side_proj"][:, b], window)), color=f"C{b % 10}", ls="--", lw=0.8,
                label=f"{names[b]}: projection")
    ax.axhline(0.5, color="0.5", ls=":", lw=1)
    # the projection share leaves [0, 1] when the two paths partly cancel; show that, within reason
    low, high = np.nanmin(shares["side_proj"]), np.nanmax(shares["side_proj"])
    ax.set(title="share of ∂L/∂x through the identity path", xlabel="step",
           ylim=(max(-0.5, min(-0.05, low)), min(1.5, max(1.05, high))))
    ax.legend(fontsize=6, ncol=2 if run.blocks > 4 else 1)
    ax = axes[1, 1]
    clip_window = max(window, 50)
    ax.plot(*thin(run.step, 100 * monitors.clip_rate(run.clipped, clip_window)), color="C3")
    if not run.clipped.any():  # a flat line at 0 reads as an empty panel
        ax.text(0.5, 0.5, f"the clip rule never fired in {len(run.step)} steps", transform=ax.transAxes,
                ha="center", va="center")
    ax.set(title=f"clip rule fired: % of the last {clip_window} steps ({int(run.clipped.sum())} steps in all)",
           xlabel="step", ylim=(-2, 102))
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True
