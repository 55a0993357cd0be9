"""`litenet eval`: test accuracy, per-class accuracy and the confusion matrix (text, PNG, JSON)."""

from __future__ import annotations

import time

import numpy as np

from litenet.atomic import atomic_write_text
from litenet.errors import UsageError
from litenet.insight import common
from litenet.insight.confusion import confusion_matrix, per_class_accuracy, predict, render_confusion, report_text
from litenet.paths import make_folder


def add_arguments(parser) -> None:
    common.add_model_argument(parser)
    common.add_data_arguments(parser)
    parser.add_argument("--out", help="folder for confusion.png and eval.json (default: the --model folder; "
                                      "runs/eval/<name> for the shipped model)")
    parser.add_argument("--limit", type=int, help="evaluate the first N test images only")


def evaluate(params, model, images, labels, classes: list[str]) -> dict:
    """Predict every image and summarise: accuracy, per-class accuracy, confusion matrix."""
    pred = predict(params, images, model)
    m = confusion_matrix(labels, pred, len(classes))
    return {"images": int(m.sum()), "accuracy": float(np.trace(m) / max(1, m.sum())),
            "per_class_accuracy": {c: (None if np.isnan(a) else float(a)) for c, a in zip(classes, per_class_accuracy(m))},
            "classes": classes, "confusion": m.tolist()}


def run(args) -> int:
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: evaluate at least 1 image")
    params, model, _, classes, folder = common.load_trained(args.model, "eval")
    test = common.open_data(args).test
    images, labels = test.images[:args.limit], np.asarray(test.labels[:args.limit], np.int64)
    started = time.perf_counter()
    result = evaluate(params, model, images, labels, classes)
    result.update(model=str(folder), seconds=round(time.perf_counter() - started, 2))
    m = np.array(result["confusion"])
    print(report_text(m, classes))
    out = common.output_folder(args.out, folder, "eval")
    make_folder(out)
    drawn = render_confusion(out / "confusion.png", m, classes,
                             f"{folder.name}: {100 * result['accuracy']:.2f}% on {result['images']} test images")
    atomic_write_text(out / "eval.json", common.json_text(result))
    written = [out / "confusion.png"] * drawn + [out / "eval.json"]
    print(f"\nwrote {' and '.join(map(str, written))}")
    return 0
