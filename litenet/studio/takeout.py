"""Take a Studio network out: its weights and config as a model folder, fp32 (and int8) ONNX through
litenet.export, and the `litenet-infer` commands that run it on a GPU, a CPU or a Raspberry Pi."""

from __future__ import annotations

import shlex
from pathlib import Path

from litenet.distribution import install_hint
from litenet.export.pipeline import ExportOptions, export_model
from litenet.weights import save_model

CALIBRATION_IMAGES = 1024  # training images for int8 calibration: enough for the percentile scales


def export(live, folder: str | Path, int8: bool, log=lambda line: None) -> dict:
    """Write `folder` (weights.safetensors, config.json, model.onnx, and with int8 the QDQ model and the
    plan); every file is checked against the NumPy forward by the exporter before it is written."""
    folder = Path(folder)
    save_model(folder, live.params(), live.model, live.train, live.name, classes=list(live.data.classes),
               global_step=live.steps, backend=live.backend_name, studio=True)
    options = ExportOptions(int8=int8, calib=min(CALIBRATION_IMAGES, len(live.data.train_images)), engine=False)
    report = export_model(folder, options=options, data=live.data.source.get("data"),
                          maps=live.data.source.get("maps"), log=log)
    return {"folder": str(folder), "files": [{"name": a.name, "bytes": len(a.data), "accuracy": a.accuracy}
                                             for a in report.artifacts],
            "fp32_check": {k: float(v) for k, v in report.fp32_check.items() if isinstance(v, (int, float))},
            "commands": infer_commands(folder, int8, live.model.family)}


def infer_commands(folder: Path, int8: bool, family: str) -> list[dict]:
    """The litenet-infer lines that run the exported model, with where each runs."""
    model = shlex.quote(str(folder))
    lines = [{"where": "this computer's CPU (ONNX Runtime)",
              "command": f"litenet-infer photo.jpg --model {model} --backend onnxruntime"}]
    if int8:
        lines.append({"where": f"a Raspberry Pi ({install_hint()}; copy the folder over)",
                      "command": f"litenet-infer photo.jpg --model {Path(folder).name} --precision int8"})
    if family in ("mlp", "mixer"):
        lines.append({"where": "an NVIDIA GPU (LiteNet's CUDA kernels)",
                      "command": f"litenet-infer photo.jpg --model {model} --backend cuda"
                                 + (" --precision int8" if int8 else "")})
    else:
        lines.append({"where": "an NVIDIA GPU",
                      "command": f"litenet-infer photo.jpg --model {model} --backend auto  "
                                 "# a layer list runs in ONNX Runtime until the CUDA lowering takes any op list"})
    return lines
