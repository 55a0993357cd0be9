"""`make ship-model`'s last step: copy what inference needs from a trained + exported folder into models/<name>/.

    python scripts/ship_model.py runs/ship-litenet-base models/litenet-base
    make ship-model RUN=runs/litenet-mixer NAME=litenet-mixer     # a run trained and exported already

The default model of litenet-infer, eval and explain is the best shipped one (a Mixer first, then
accuracy; litenet/runtime/model_choice.py) unless the user has a finished run of their own.

Kept: model.onnx, model.int8.onnx, model.int8.plan.safetensors, config.json, weights.safetensors
(the CUDA fp32 path reads it), and metrics.json (the epoch records of metrics.jsonl and the export's
test accuracies) plus a README.md model card. Left behind: the checkpoint, the per-step log, the
calibration scales, pictures, and any TensorRT engine (tied to the GPU and TensorRT that built it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litenet.runtime import model_files as mf  # noqa: E402

SHIPPED = (mf.FP32_ONNX, mf.INT8_ONNX, mf.PLAN, mf.CONFIG, mf.WEIGHTS)


def fail(message: str) -> None:
    print(f"ship-model: error: {message}", file=sys.stderr)
    sys.exit(1)


def check_complete(src: Path) -> dict:
    """The config of a finished run whose export is newer than its weights; exits with the fix otherwise."""
    missing = [n for n in (*SHIPPED, "metrics.jsonl") if not (src / n).is_file()]
    if missing:
        fail(f"{src} lacks {', '.join(missing)}; run make train and make export-int8 with OUT={src} first")
    config = json.loads((src / mf.CONFIG).read_text(encoding="utf-8"))
    done, planned = config.get("epochs_done"), config.get("train", {}).get("epochs")
    if done != planned:
        fail(f"training in {src} stopped at epoch {done} of {planned}; resume it with "
             f"`litenet train --resume --out {src}` or delete the folder to start over")
    weights_time = (src / mf.WEIGHTS).stat().st_mtime
    stale = [n for n in (mf.FP32_ONNX, mf.INT8_ONNX, mf.PLAN) if (src / n).stat().st_mtime < weights_time]
    if stale:
        fail(f"{', '.join(stale)} in {src} are older than its weights; run make export-int8 OUT={src} again")
    return config


def metrics_summary(src: Path, config: dict) -> dict:
    """The epoch records and the accuracy each exported file measured on the 10,000 test images."""
    epochs = [r for r in map(json.loads, (src / "metrics.jsonl").read_text(encoding="utf-8").splitlines())
              if r.get("type") == "epoch"]
    export = {
        mf.FP32_ONNX: float(mf.onnx_metadata(src / mf.FP32_ONNX)["test_accuracy"]),
        mf.INT8_ONNX: float(mf.onnx_metadata(src / mf.INT8_ONNX)["test_accuracy"]),
        mf.PLAN: float(mf.safetensors_metadata(src / mf.PLAN)["test_accuracy"]),
    }
    return {"format": "litenet-metrics-summary/1", "preset": config.get("preset"), "model": config.get("model"),
            "train": config.get("train"), "backend": config.get("backend"),
            "test_accuracy": {"training": config.get("test_accuracy"), **export},
            "epochs": epochs}


def _precision(summary: dict) -> str:
    precision = (summary.get("train") or {}).get("precision", "fp32")
    return "" if precision == "fp32" else f", {precision.upper()} products"


def model_card(summary: dict, sizes: dict[str, int]) -> str:
    """README.md for the shipped folder."""
    acc = summary["test_accuracy"]
    m = summary["model"]
    shape = ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("classes", "ln_eps", "input_shift", "embed_init"))
    lines = [f"# {summary['preset']}: a model shipped with LiteNet", "",
             f"Copied by `make ship-model` from a run trained (`litenet train --preset {summary['preset']}`) and "
             f"exported (`litenet export --int8`): {shape}; "
             f"{len(summary['epochs'])} epochs on the {summary['backend']} backend"
             f"{_precision(summary)}.", "",
             "litenet-infer, `litenet eval` and `litenet explain` use the best shipped model (a Mixer first, then "
             "test accuracy) when no `--model` is given and the user has no finished run of their own.", "",
             "| file | size | test accuracy (10,000 CIFAR-10 test images) |", "|---|---|---|"]
    for name, size in sizes.items():
        value = acc.get(name)
        shown = f"{size / 2**20:.2f} MiB" if size >= 2**20 else f"{size / 1024:.1f} KiB"
        lines.append(f"| {name} | {shown} | {'' if value is None else f'{100 * value:.2f} %'} |")
    lines += ["", "metrics.json holds every epoch's loss and accuracy; docs/runtime.md says how to use the files."]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: ship_model.py TRAINED_AND_EXPORTED_FOLDER MODELS_FOLDER")
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    config = check_complete(src)
    summary = metrics_summary(src, config)
    dst.mkdir(parents=True, exist_ok=True)
    same = src.resolve() == dst.resolve()  # trained and exported in place: nothing to copy
    for name in () if same else SHIPPED:  # each through a temporary + rename: never half a file
        shutil.copyfile(src / name, dst / f".{name}.tmp")
        os.replace(dst / f".{name}.tmp", dst / name)
    (dst / "metrics.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    sizes = {name: (dst / name).stat().st_size for name in (*SHIPPED, "metrics.json")}
    (dst / "README.md").write_text(model_card(summary, sizes), encoding="utf-8")
    extra = sorted(p.name for p in dst.iterdir() if p.name not in (*SHIPPED, "metrics.json", "README.md"))
    print(f"ship-model: {dst}: {sum(sizes.values()) / 2**20:.1f} MiB in {len(sizes) + 1} files"
          + (f"; also present, not to be committed: {', '.join(extra)}" if extra else ""))


if __name__ == "__main__":
    main()
