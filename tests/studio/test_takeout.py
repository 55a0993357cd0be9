"""A network composed in the Studio, taken out: saved as a preset that `litenet train` trains, and exported to
ONNX (fp32 and int8) that `litenet-infer` runs."""

import os
import subprocess
import sys

import numpy as np
from PIL import Image

from cli_runs import REPO, litenet
from litenet.studio import takeout


def test_a_saved_preset_trains_with_litenet_train(live, maps, tmp_path):
    path = live.save_preset(tmp_path, "composed")
    out = tmp_path / "run"
    r = litenet("train", "--preset", str(path), "--maps", str(maps), "--out", str(out), "--epochs", "1", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "composed on 320 images, numpy backend" in r.stdout and (out / "weights.safetensors").is_file()


def test_export_writes_checked_onnx_that_litenet_infer_runs(live, tmp_path):
    for _ in range(3):
        live.step()
    lines = []
    result = takeout.export(live, tmp_path / "model", int8=True, log=lines.append)
    names = {f["name"] for f in result["files"]}
    assert {"model.onnx", "model.int8.onnx", "model.int8.plan.safetensors"} <= names
    assert result["fp32_check"]["max_abs_diff"] <= result["fp32_check"]["tolerance"] and lines
    cpu = next(c["command"] for c in result["commands"] if "CPU" in c["where"])
    assert cpu.startswith("litenet-infer photo.jpg --model ")
    image = tmp_path / "photo.jpg"
    Image.fromarray(np.full((40, 40, 3), 120, np.uint8)).save(image)
    args = cpu.split()[1:]
    args[0] = str(image)
    r = subprocess.run([sys.executable, "-m", "litenet.runtime", *args, "--precision", "int8"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert r.returncode == 0 and "onnxruntime int8" in r.stdout, r.stderr
