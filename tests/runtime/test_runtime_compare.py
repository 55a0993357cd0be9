"""The x86-64 vs arm64 comparison of scripts/arm-check.sh (scripts/arm/compare_outputs.py)."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from litenet.runtime import records

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "arm" / "compare_outputs.py"
spec = importlib.util.spec_from_file_location("compare_outputs", SCRIPT)
co = importlib.util.module_from_spec(spec)
sys.modules["compare_outputs"] = co  # dataclasses looks its module up while building the class
spec.loader.exec_module(co)

CLASSES = ["a", "b", "c"]


def run(folder: str) -> list[dict]:
    """Three classified images and one refused, as litenet-infer --json writes them."""
    rows = [records.ok_record(f"{folder}/img{i}.png", z, CLASSES, 2, "onnxruntime", "fp32", "m", 4, 0.1)
            for i, z in enumerate([[1.0, 2.0, 0.5], [3.0, -1.0, 0.0], [0.1, 0.2, 0.3]])]
    return rows + [records.error_record(f"{folder}/odd.png", f"{folder}/odd.png: damaged")]


def keyed(rows: list[dict]) -> dict[str, dict]:
    return {Path(r["image"]).name: r for r in rows}


def test_identical_runs_in_other_folders_pass():
    c = co.compare(keyed(run("/x86")), keyed(run("/chroot/tmp")), co.FP32_ATOL)
    assert c.ok and c.images == 4 and c.same_class == 4 and c.max_logit_diff == 0.0


def test_small_drift_passes_and_large_fails():
    other = run("/arm")
    other[0]["logits"][1] += 5e-6
    other[0]["topk"][0]["score"] += 3e-6
    c = co.compare(keyed(run("/x86")), keyed(other), co.FP32_ATOL)
    assert c.ok and c.max_logit_diff == pytest.approx(5e-6) and c.max_score_diff == pytest.approx(3e-6)
    other[1]["logits"][0] += 2e-5
    c = co.compare(keyed(run("/x86")), keyed(other), co.FP32_ATOL)
    assert not c.ok and "img1.png" in c.problems[0]
    assert co.compare(keyed(run("/x86")), keyed(other), co.INT8_ATOL).ok  # int8 allows rounding flips


def test_class_outcome_and_missing_images_fail():
    other = copy.deepcopy(run("/arm"))
    other[2]["class"] = "a"
    other[3] = records.ok_record("/arm/odd.png", [0, 0, 1], CLASSES, 1, "onnxruntime", "fp32", "m", 1, 0.1)
    del other[0]
    c = co.compare(keyed(run("/x86")), keyed(other), co.FP32_ATOL)
    assert not c.ok
    text = " ".join(c.problems)
    assert "img0.png: only in the reference" in text and "img2.png: class c vs a" in text
    assert "odd.png: classified on one side only" in text


def test_command_line_and_markdown(tmp_path, capsys):
    for name, folder in (("x86.jsonl", "/x86"), ("arm.jsonl", "/arm")):
        (tmp_path / name).write_text("\n".join(json.dumps(r) for r in run(folder)) + "\n")
    assert co.main([str(tmp_path / "x86.jsonl"), str(tmp_path / "arm.jsonl"), "--label", "Pi 5"]) == 0
    row = capsys.readouterr().out.strip()
    assert row.startswith("| Pi 5 | fp32 | 4 | 4/4 | 0.00e+00 | 0.00e+00 | 1e-05 | pass |")
