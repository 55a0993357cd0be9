"""`litenet init-compare`: the seed's initialisation experiment (section 5.2), measured.

The same preset and batches from two embedding initialisations: N(0, 1) (the seed's torch.randn)
and kaiming-uniform with a = √5 (U(±1/√fan_in)); the global gradient norm of the first batches
before clipping, and how often the clip rule (‖g‖ > 10 → rescale to 1) fires.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.insight import common
from litenet.insight.short_runs import short_run
from litenet.model import load_preset

INITS = ("normal", "kaiming-uniform")
SEED_BATCH = 12  # the seed reports ‖g‖ = 23.7 "at batch 12" with N(0, 1), < 0.8 throughout with kaiming


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default="litenet-seed", help="preset name or .toml (default litenet-seed)")
    parser.add_argument("--steps", type=int, default=100, help="batches per initialisation (default 100)")
    parser.add_argument("--out", default="runs/init-compare", help="folder for init-compare.png and .json")
    common.add_data_arguments(parser)


def compare(preset_name: str, steps: int, images, labels) -> dict:
    """Run both initialisations for `steps` steps; per-step norms and a summary of each."""
    if steps < 1:
        raise LiteNetError("--steps must be at least 1")
    preset = load_preset(preset_name)
    runs = {}
    for init in INITS:
        model = dataclasses.replace(preset.model, embed_init=init)
        s = short_run(model, preset.train, images, labels, steps, progress=init)["stats"]
        norms = s["grad_norm"]
        embed = np.sqrt(s["grad_sq"][:, 0])  # the embedding is the first tensor in the layout
        runs[init] = {
            "grad_norm": [float(v) for v in norms], "embed_grad_norm": [float(v) for v in embed],
            "loss": [float(v) for v in s["loss"]], "clipped": [bool(v) for v in s["clipped"]],
            "at_batch_12": float(norms[SEED_BATCH - 1]) if len(norms) >= SEED_BATCH else None,
            "max": float(np.max(norms)), "max_at_batch": int(np.argmax(norms)) + 1,
            "median": float(np.median(norms)), "last_10_mean": float(np.mean(norms[-10:])),
            "clipped_steps": int(np.sum(s["clipped"])), "below_0.8": float(np.mean(norms < 0.8)),
            "loss_last_10": float(np.mean(s["loss"][-10:]))}
    return {"preset": preset.name, "steps": steps, "clip_threshold": preset.train.clip_threshold,
            "warmup_steps": preset.train.warmup_steps, "runs": runs}


def report(result: dict) -> str:
    lines = [f"{result['preset']}, {result['steps']} batches; ‖g‖ before clipping (batch numbers from 1)",
             f"{'embedding init':<16} {'batch 12':>9} {'max (batch)':>14} {'median':>8} {'last 10':>8} "
             f"{'clipped':>8} {'<0.8':>6} {'loss, last 10':>14}"]
    for init, r in result["runs"].items():
        b12 = "n/a" if r["at_batch_12"] is None else f"{r['at_batch_12']:.4g}"
        lines.append(f"{init:<16} {b12:>9} {r['max']:>8.4g} ({r['max_at_batch']:>3}) {r['median']:>8.4g} "
                     f"{r['last_10_mean']:>8.4g} {r['clipped_steps']:>8} {100 * r['below_0.8']:>5.0f}% {r['loss_last_10']:>14.4f}")
    return "\n".join(lines)


def plot(result: dict, out_png: Path) -> bool:
    """‖g‖ per batch for both initialisations, with the clip threshold and the seed's batch 12.
    False (after one notice) without matplotlib."""
    from litenet.atomic import atomic_path
    from litenet.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return False

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.12, wspace=0.22)
    fig.suptitle(f"embedding initialisation, {result['preset']}: N(0, 1) vs kaiming-uniform (a = √5); "
                 f"seed claims 23.7 at batch 12 vs < 0.8", fontsize=10)
    for n, (init, r) in enumerate(result["runs"].items()):
        batches = np.arange(1, len(r["grad_norm"]) + 1)
        a.semilogy(batches, r["grad_norm"], color=f"C{n}", label=f"{init}: ‖g‖ ({r['clipped_steps']} clipped)")
        a.semilogy(batches, r["embed_grad_norm"], color=f"C{n}", ls=":", lw=1, label=f"{init}: ‖∂We‖")
        b.plot(batches, r["loss"], color=f"C{n}", label=init)
    a.axhline(result["clip_threshold"], color="C3", ls="--", lw=1, label="clip threshold")
    a.axhline(0.8, color="0.5", ls=":", lw=1)
    a.axvline(SEED_BATCH, color="0.5", ls=":", lw=1)
    a.set(title="global gradient norm before clipping", xlabel="batch")
    a.legend(fontsize=7)
    b.set(title="batch loss", xlabel="batch")
    b.legend(fontsize=8)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True


def run(args) -> int:
    common.check_steps(args.steps)
    ds = common.open_data(args)
    started = time.perf_counter()
    result = compare(args.preset, args.steps, ds.train.images, ds.train.labels)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(report(result))
    common.save_experiment(result, args.out, "init-compare", plot)
    return 0
