"""Regenerate the figures of docs/insight.md from a trained model folder and a seed-preset run.

    python -m litenet.insight.figures --model models/litenet-base --run runs/ship-litenet-base \
        --seed-run runs/insight-seed --late-run runs/insight-base-10k --out docs/figures

(`make insight-figures` runs this.) Every picture is drawn by the same code the commands use; the
path-share table printed at the end is the one docs/insight.md quotes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.insight import common
from litenet.insight.confusion import confusion_matrix, predict, render_confusion, report_text
from litenet.insight.explain import explain_files, explain_grid
from litenet.train import monitors
from litenet.train.plots import plot_gradients, plot_training

SAMPLE_TEST_IMAGES = (0, 1, 2)  # the per-image saliency figures
ODD_SOURCE = 7  # the test image turned into a 300 × 200 grey-scale photo
GRID = 24


def run_figures(metrics_folder: Path, out: Path, prefix: str) -> None:
    """curves and gradient-flow figures of one run, and its path-share table on stdout."""
    metrics = metrics_folder / "metrics.jsonl"
    plot_training(metrics, out / f"{prefix}-curves.png")
    plot_gradients(metrics, out / f"{prefix}-gradients.png")
    print(f"\n{prefix}: {metrics_folder} — path shares of ∂L/∂x (mean of per-step shares)")
    print(path_share_table(monitors.read_run(metrics_folder)))


def path_share_table(run: monitors.RunLog) -> str:
    """The early/late table as Markdown: identity-path share by norm and by projection, per block."""
    found = monitors.phases(run)
    lines = [f"phase mapping: {found['mapping']}",
             "| phase | rule | block | steps | mean loss | identity share (norm) | main share (norm) "
             "| identity share (projection) | main share (projection) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in monitors.phase_table(run):
        if r["steps"] == 0:
            lines.append(f"| {r['phase']} | {r['rule']} | {r['block']} | 0 | – | – | – | – | – |")
            continue
        lines.append(f"| {r['phase']} (steps {r['first_step']}–{r['last_step']}) | {r['rule']} | {r['block']} | "
                     f"{r['steps']} | {r['loss_mean']:.3f} | {100 * r['side_norm']:.1f} % | {100 * r['main_norm']:.1f} % | "
                     f"{100 * r['side_proj']:.1f} % | {100 * r['main_proj']:.1f} % |")
    return "\n".join(lines)


def model_figures(folder: str, out: Path, args) -> None:
    """Confusion matrix and saliency maps of a trained model (CIFAR-10 test images)."""
    from PIL import Image

    params, model, train, classes, path = common.load_trained(folder)
    test = common.open_data(args).test
    labels = np.asarray(test.labels, np.int64)
    m = confusion_matrix(labels, predict(params, test.images, model), len(classes))
    render_confusion(out / "base-confusion.png", m, classes,
                     f"{path.name}: {100 * np.trace(m) / m.sum():.2f}% on {m.sum()} test images")
    print("\n" + report_text(m, classes))
    explain_grid(GRID, out, params, model, classes, args)
    with tempfile.TemporaryDirectory() as tmp:  # the sample inputs are CIFAR's own; no need to keep them
        files = []
        for i in SAMPLE_TEST_IMAGES:
            files.append(str(Path(tmp) / f"test{i}-{classes[labels[i]]}.png"))
            Image.fromarray(np.asarray(test.images[i])).save(files[-1])
        odd = Image.fromarray(np.asarray(test.images[ODD_SOURCE])).resize((300, 200), Image.Resampling.BICUBIC)
        files.append(str(out / f"odd-grey-300x200-{classes[labels[ODD_SOURCE]]}.png"))
        odd.convert("L").save(files[-1])
        if explain_files(files, out, params, model, train, classes):
            raise LiteNetError("a sample image could not be explained")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m litenet.insight.figures", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/litenet-base", help="trained default-preset folder (its weights)")
    parser.add_argument("--run", help="the training folder holding that model's metrics.jsonl (default: --model "
                        "when it has one, else runs/ship-litenet-base, where make ship-model trains)")
    parser.add_argument("--seed-run", default="runs/insight-seed", help="a litenet-seed training folder")
    parser.add_argument("--late-run", default="runs/insight-base-10k",
                        help="a litenet-base run whose loss gets below 0.5 (the seed's late phase)")
    parser.add_argument("--out", default="docs/figures")
    common.add_data_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        run = Path(args.run) if args.run else Path(args.model)
        if not args.run and not (run / "metrics.jsonl").is_file():
            run = Path("runs/ship-litenet-base")  # the shipped folder keeps no per-step log
        run_figures(run, out, "base")
        for folder, prefix in ((args.seed_run, "seed"), (args.late_run, "base10k")):
            if Path(folder, "metrics.jsonl").is_file():
                run_figures(Path(folder), out, prefix)
            else:
                print(f"(no run in {folder}; its {prefix} figures are skipped)", file=sys.stderr)
        model_figures(args.model, out, args)
    except LiteNetError as exc:
        print(f"insight figures: error: {exc}", file=sys.stderr)
        return 1
    print(f"\nfigures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
