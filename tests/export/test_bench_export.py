"""The export benchmarks in bench/ (export_report, export_ablation): the report's statistics, the
ablation's scores, and that both run as scripts from a checkout, as `make export-report` runs them."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # the bench scripts are not a package; they import each other by file name

import export_ablation  # noqa: E402
from export_report import paired_comparison  # noqa: E402


def test_mcnemar_exact_p_value():
    ours = np.array([True] * 10 + [False] * 0 + [True] * 5)
    theirs = np.array([False] * 10 + [True] * 5)
    result = paired_comparison(ours, theirs)
    assert (result["only_ours"], result["only_peer"]) == (10, 0)
    assert result["p"] == pytest.approx(2 / 2**10)  # all ten disagreements one way
    assert paired_comparison(ours, ours)["p"] == 1.0  # no disagreement, no evidence


def test_the_ablation_scores_every_variant_off_the_calibration_images(model_dir, dataset, monkeypatch):
    monkeypatch.setattr(export_ablation, "HELD_OUT", 200)
    fig = export_ablation.study(model_dir, seeds=(0, 1), calib=64, log=lambda line: None)
    assert len(fig["scores"]) == 3 * len(export_ablation.VARIANTS) * 2  # methods × variants × seeds
    for score in fig["scores"].values():
        assert score["kl"] >= 0 and 0 <= score["differ"] <= 200 and 0 <= score["acc"] <= 1
    # GPTQ with bias correction does no worse than the data-free export (nearest, trained biases), on average
    plain = np.mean([fig["scores"][("percentile", "nearest", False, s)]["kl"] for s in (0, 1)])
    assert np.mean([fig["scores"][("percentile", "gptq", True, s)]["kl"] for s in (0, 1)]) <= plain * 1.05
    assert "| percentile | gptq | yes |" in export_ablation.to_markdown(fig)


@pytest.mark.parametrize("script", ["export_report.py", "export_ablation.py"])
def test_the_script_runs_as_a_file_from_any_folder(script, tmp_path):
    # From another folder, so only the script's own sys.path line can find litenet and its sibling.
    run = subprocess.run([sys.executable, str(BENCH / script), "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"usage: python bench/{script}" in run.stdout
