"""`litenet-infer --video` and `litenet bench-infer` on a real GPU with LiteNet's CUDA backend (skipped
without CuPy and a GPU): the shipped model's int8 plan classifies a generated clip as ONNX Runtime's
QDQ int8 model does (the two int8 paths may part on a borderline frame), and bench-infer times it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from litenet.cli import main as litenet_main
from litenet.runtime import cli as infer_cli

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "models" / "litenet-base"
sys.path.insert(0, str(REPO / "bench"))
pytestmark = pytest.mark.gpu
cv2 = pytest.importorskip("cv2")


def frames(capsys, *argv) -> list[dict]:
    assert infer_cli.main(["--json", *map(str, argv)]) == 0
    return [r for r in map(json.loads, capsys.readouterr().out.splitlines()) if r["type"] == "frame"]


def test_video_cuda_int8_agrees_with_onnxruntime(capsys, tmp_path):
    import video_clip

    clip = tmp_path / "clip.avi"
    video_clip.write_clip(clip, video_clip.cifar_test_images(100)[0], hold=1)
    common = ["--video", clip, "--model", SHIPPED, "--precision", "int8", "--predecode", "--batch-size", "32"]
    gpu = frames(capsys, *common, "--backend", "cuda")
    cpu = frames(capsys, *common, "--backend", "onnxruntime")
    assert {r["backend"] for r in gpu} == {"cuda"} and len(gpu) == len(cpu) == 100
    assert np.mean([g["index"] == c["index"] for g, c in zip(gpu, cpu)]) >= 0.95


def test_bench_infer_has_cuda_rows(capsys):
    code = litenet_main(["bench-infer", str(SHIPPED), "--backend", "cuda", "--batch", "1", "256", "--loops", "20",
                         "--cooldown", "0", "--json", "--quiet"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and [(r["precision"], r["batch"]) for r in report["rows"]] == [
        ("fp32", 1), ("fp32", 256), ("int8", 1), ("int8", 256)]
    assert report["machine"]["gpus"]
