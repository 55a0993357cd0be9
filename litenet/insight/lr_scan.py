"""`litenet lr-scan`: the seed's lr rule (section 4.3) tested: short runs at several learning rates.

The seed picks the lr at which the mean gradient norm over the warm-up settles in 0.02–0.05. For
each lr this measures that mean, the loss trend and the held-out loss and accuracy after N steps,
so one can see whether the rule's pick is also the lr that trains best. The seed does not say
which norm; two readings are measured: the global ‖g‖₂ ("norm") and the root mean square of
the gradient's entries, ‖g‖₂ / √P over the P parameters ("rms").
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError, UsageError
from litenet.insight import common
from litenet.insight.short_runs import held_out, short_run
from litenet.model import load_preset, param_count

SEED_BAND = (0.02, 0.05)  # the seed's "mean ‖∇W‖ over the warm-up" window
DEFAULT_LRS = (0.003, 0.006, 0.012, 0.02, 0.04, 0.08)
HELD_OUT = 2000  # test images scored after each run


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default="litenet-seed", help="preset name or .toml (default litenet-seed, the seed's own)")
    parser.add_argument("--lrs", type=float, nargs="+", default=list(DEFAULT_LRS), metavar="LR",
                        help="peak learning rates after the batch scaling (default %(default)s)")
    parser.add_argument("--steps", type=int, default=500, help="steps per run (default 500)")
    parser.add_argument("--out", default="runs/lr-scan", help="folder for lr-scan.png and lr-scan.json")
    common.add_data_arguments(parser)


def scan(preset_name: str, lrs: list[float], steps: int, train_images, train_labels, test_images, test_labels) -> dict:
    """Run the preset at each lr for `steps` steps and measure the rule's quantity and the outcome."""
    preset = load_preset(preset_name)
    model, base = preset.model, preset.train
    if steps < 1 or not lrs or min(lrs) <= 0:
        raise LiteNetError("--steps must be ≥ 1 and every --lrs value positive")
    tail = max(1, min(100, steps // 5))  # the "after N steps" loss: the mean of the last steps
    results = []
    for lr in lrs:
        train = dataclasses.replace(base, lr_base=lr * 256 / base.batch_size)
        run = short_run(model, train, train_images, train_labels, steps, progress=f"lr {lr:g}")
        s = run["stats"]
        warm = s["grad_norm"][:min(train.warmup_steps, len(s["grad_norm"]))]
        finite = bool(np.all(np.isfinite(s["loss"]))) and len(s["loss"]) == steps
        test_loss, test_acc = held_out(run["backend"], test_images, test_labels, train) if finite else (np.nan, np.nan)
        results.append({
            "lr": lr, "lr_base": train.lr_base, "steps": len(s["loss"]), "finite": finite,
            "warmup_mean_grad_norm": float(np.mean(warm)), "warmup_steps": len(warm),
            "warmup_mean_grad_rms": float(np.mean(warm) / np.sqrt(param_count(model))),
            "mean_grad_norm_after_warmup": float(np.mean(s["grad_norm"][len(warm):])) if len(s["grad_norm"]) > len(warm) else None,
            "clipped_steps": int(s["clipped"].sum()),
            "loss_first": float(np.mean(s["loss"][:tail])), "loss_last": float(np.mean(s["loss"][-tail:])),
            "held_out_loss": test_loss, "held_out_accuracy": test_acc,
            "loss_curve": [float(v) for v in s["loss"]], "grad_norm_curve": [float(v) for v in s["grad_norm"]]})
    return {"preset": preset.name, "loss": base.loss, "batch_size": base.batch_size, "steps": steps,
            "tail_steps": tail, "held_out_images": len(test_images), "band": SEED_BAND, "runs": results,
            "verdict": verdict(results)}


def verdict(results: list[dict]) -> dict:
    """For each reading of the rule, its pick (warm-up mean in the band; of several, or of none,
    the nearest to the band's geometric middle) against the lrs with the best held-out loss and accuracy."""
    middle = np.sqrt(SEED_BAND[0] * SEED_BAND[1])
    ok = [r for r in results if r["finite"] and np.isfinite(r["held_out_loss"])]
    best_loss = min(ok, key=lambda r: r["held_out_loss"])["lr"] if ok else None
    best_acc = max(ok, key=lambda r: r["held_out_accuracy"])["lr"] if ok else None
    out = {"best_loss_lr": best_loss, "best_accuracy_lr": best_acc}
    for reading in ("norm", "rms"):
        key = f"warmup_mean_grad_{reading}"
        in_band = [r for r in results if SEED_BAND[0] <= r[key] <= SEED_BAND[1]]
        pick = min(in_band or results, key=lambda r: abs(np.log(r[key] / middle)))
        out[reading] = {"pick_lr": pick["lr"], "in_band": [r["lr"] for r in in_band],
                        "picks_best_loss": pick["lr"] == best_loss, "picks_best_accuracy": pick["lr"] == best_acc}
    return out


def plot(result: dict, out_png: Path) -> bool:
    """Left: the loss of every run; right: warm-up mean ‖g‖ and held-out loss against the lr.
    False (after one notice) without matplotlib."""
    from litenet.atomic import atomic_path
    from litenet.plotting import pyplot
    from litenet.train.plots import smooth

    plt = pyplot()
    if plt is None:
        return False

    runs = result["runs"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(left=0.07, right=0.9, top=0.88, bottom=0.12, wspace=0.35)
    fig.suptitle(f"lr scan, {result['preset']}: {result['steps']} steps per lr; the seed's rule picks the lr "
                 f"whose warm-up mean ‖g‖ is in {SEED_BAND[0]}–{SEED_BAND[1]}", fontsize=10)
    for n, r in enumerate(runs):
        a.plot(smooth(np.array(r["loss_curve"]), 25), color=f"C{n % 10}", label=f"lr {r['lr']:g}")
    a.set(title=f"batch loss ({result['loss']}, running mean over 25 steps)", xlabel="step")
    a.legend(fontsize=8)
    lrs = [r["lr"] for r in runs]
    b.axhspan(*SEED_BAND, color="C2", alpha=0.15, label="seed's band")
    b.loglog(lrs, [r["warmup_mean_grad_norm"] for r in runs], "o-", color="C2", label="warm-up mean ‖g‖₂")
    b.loglog(lrs, [r["warmup_mean_grad_rms"] for r in runs], "^:", color="C2", label="… ‖g‖₂ / √P")
    b.set(xlabel="peak lr", ylabel="mean ‖g‖ over the warm-up", title="rule quantity vs outcome")
    c = b.twinx()
    c.semilogx(lrs, [100 * r["held_out_accuracy"] for r in runs], "s--", color="C3", label="held-out accuracy")
    c.set_ylabel(f"accuracy (%) on {result['held_out_images']} test images after the run", color="C3")
    b.legend(loc="upper left", fontsize=8), c.legend(loc="lower right", fontsize=8)
    from matplotlib.ticker import NullFormatter
    for axis in (b, c):  # label the scanned lrs only; log-axis minor labels collide
        axis.set_xticks(lrs, [f"{lr:g}" for lr in lrs], fontsize=8)
        axis.xaxis.set_minor_formatter(NullFormatter())
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return True


def report(result: dict) -> str:
    lines = [f"{'lr':>8} {'warm-up ‖g‖':>12} {'rms':>9} {'after':>9} {'clipped':>8} {'loss first→last':>18} "
             f"{'held-out loss':>14} {'acc':>7}"]
    for r in result["runs"]:
        after = r["mean_grad_norm_after_warmup"]
        lines.append(f"{r['lr']:>8g} {r['warmup_mean_grad_norm']:>12.4g} {r['warmup_mean_grad_rms']:>9.3g} "
                     f"{after if after is None else f'{after:.4g}':>9} "
                     f"{r['clipped_steps']:>8} {r['loss_first']:>8.4f} → {r['loss_last']:<7.4f} "
                     f"{r['held_out_loss']:>14.4f} {100 * r['held_out_accuracy']:>6.2f}%")
    v = result["verdict"]
    lines.append(f"best held-out loss at lr {v['best_loss_lr']}, best held-out accuracy at lr {v['best_accuracy_lr']}")
    for reading, what in (("norm", "‖g‖₂"), ("rms", "‖g‖₂/√P")):
        pick = v[reading]
        band = (f"in the band: {', '.join(f'{lr:g}' for lr in pick['in_band'])}" if pick["in_band"]
                else "none in the band; the nearest")
        lines.append(f"rule with {what}: picks lr {pick['pick_lr']:g} ({band}); "
                     f"best loss: {'yes' if pick['picks_best_loss'] else 'no'}, "
                     f"best accuracy: {'yes' if pick['picks_best_accuracy'] else 'no'}")
    return "\n".join(lines)


def run(args) -> int:
    bad = [lr for lr in args.lrs if not 0 < lr < float("inf")]  # NaN fails this too
    if bad:
        raise UsageError(f"--lrs {bad[0]}: every learning rate must be a positive finite number")
    common.check_steps(args.steps)
    ds = common.open_data(args)
    started = time.perf_counter()
    result = scan(args.preset, args.lrs, args.steps, ds.train.images, ds.train.labels,
                  np.asarray(ds.test.images[:HELD_OUT]), np.asarray(ds.test.labels[:HELD_OUT]))
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(report(result))
    common.save_experiment(result, args.out, "lr-scan", plot)
    return 0
