"""`litenet explain`: saliency maps (gradient × input) for image files or a sheet of test images."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError, UsageError, one_line
from litenet.insight import common
from litenet.insight.saliency import class_scores, load_image, render_explanation, render_grid, saliency
from litenet.runtime.records import shown_path
from litenet.paths import make_folder


def add_arguments(parser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE",
                        help="image files (any size and mode Pillow reads), folders (their images) or glob patterns")
    common.add_model_argument(parser)
    parser.add_argument("--out", help="folder for the PNGs (default: the --model folder's explain/; "
                                      "runs/explain/<name> for the shipped model)")
    parser.add_argument("--grid", type=int, metavar="N", help="also draw a sheet of the first N test images")
    common.add_data_arguments(parser)


def explain_files(paths: list[str], out: Path, params, model, train, classes) -> list[str]:
    """Write <out>/<stem>.saliency.png per readable image among `paths` (files, folders of images or
    glob patterns, expanded as litenet-infer does); return the error line of each failure."""
    from litenet.runtime.images import expand_inputs

    errors, written = [], set()
    for path, problem in expand_inputs(paths):
        info: dict = {}
        try:
            if problem is not None:
                raise LiteNetError(f"{path}: {problem}")
            image = load_image(path, info)
        except LiteNetError as exc:
            errors.append(str(exc))
            print(f"litenet explain: error: {one_line(str(exc))}", file=sys.stderr)
            continue
        z, maps = saliency(params, image[None], model)
        scores, kind = class_scores(z, train.loss)
        target = _unique(out / f"{Path(path).stem}.saliency.png", written)
        width, height = info["size"]
        drawn = render_explanation(target, image, maps[0], scores[0], kind, classes,
                                   title=f"{Path(path).name} ({width} × {height}, mode {info['mode']})")
        top = np.argsort(-scores[0])[:3]
        listed = ", ".join(f"{classes[i]} {_fmt(scores[0, i], kind)}" for i in top)
        print(f"{shown_path(path)}: {listed}" + (f" → {target}" if drawn else ""))
    return errors


def explain_grid(count: int, out: Path, params, model, classes, args) -> Path:
    """A sheet of the first `count` test images with their maps, titled true → predicted."""
    if count < 1:
        raise UsageError("--grid needs a positive number of images")
    test = common.open_data(args).test
    images = np.asarray(test.images[:count])
    labels = np.asarray(test.labels[:count], np.int64)
    z, maps = saliency(params, images, model)
    pred = z.argmax(axis=1)
    target = out / f"grid-{len(images)}.saliency.png"
    right = int((pred == labels).sum())
    drawn = render_grid(target, images, maps, pred, labels, classes,
                        title=f"gradient × input for the predicted class — true → predicted ({right}/{len(images)} right)")
    print(f"{len(images)} test images, {right} classified right" + (f" → {target}" if drawn else ""))
    return target


def _unique(target: Path, written: set) -> Path:
    """target, or target with -2, -3, … when an earlier image of this call had the same name."""
    candidate, n = target, 1
    while candidate in written:
        n += 1
        candidate = target.with_name(target.name.replace(".saliency.png", f"-{n}.saliency.png"))
    written.add(candidate)
    return candidate


def _fmt(value: float, kind: str) -> str:
    return f"{100 * value:.1f}%" if kind == "probability" else f"{value:+.3f}"


def run(args) -> int:
    if not args.images and not args.grid:
        raise UsageError("give image files, --grid N, or both")
    params, model, train, classes, folder = common.load_trained(args.model, "explain")
    out = common.output_folder(args.out, folder, "explain")
    make_folder(out)
    errors = explain_files(args.images, out, params, model, train, classes)
    if args.grid:
        explain_grid(args.grid, out, params, model, classes, args)
    if errors:
        print(f"litenet explain: {len(errors)} of the inputs failed", file=sys.stderr)
        return 1
    return 0
