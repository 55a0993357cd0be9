"""lr-scan and init-compare on a tiny preset and synthetic data: they run, report, plot and write JSON."""

import json

from litenet.cli import main
from litenet.insight import init_compare, lr_scan


def test_lr_scan_command(tmp_path, tiny_preset, dataset, capsys):
    assert main(["lr-scan", "--preset", tiny_preset, "--lrs", "0.01", "0.1", "--steps", "12",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rule with ‖g‖₂" in out and "best held-out accuracy" in out
    doc = json.loads((tmp_path / "lr-scan.json").read_text())
    assert [r["lr"] for r in doc["runs"]] == [0.01, 0.1]
    assert all(r["warmup_steps"] == 5 and len(r["loss_curve"]) == 12 for r in doc["runs"])
    assert (tmp_path / "lr-scan.png").stat().st_size > 1000


def test_lr_scan_verdict():
    runs = [{"lr": lr, "finite": True, "warmup_mean_grad_norm": g, "warmup_mean_grad_rms": g / 100,
             "held_out_loss": loss, "held_out_accuracy": acc}
            for lr, g, loss, acc in [(0.01, 0.03, 1.0, 0.5), (0.1, 0.2, 0.8, 0.6), (1.0, 3.0, 2.0, 0.1)]]
    v = lr_scan.verdict(runs)
    assert v["norm"]["pick_lr"] == 0.01 and v["norm"]["in_band"] == [0.01] and not v["norm"]["picks_best_loss"]
    assert v["rms"]["pick_lr"] == 1.0 and v["rms"]["in_band"] == [1.0]
    assert v["best_loss_lr"] == 0.1 and v["best_accuracy_lr"] == 0.1


def test_a_diverging_lr_is_a_result_not_a_crash(tmp_path, tiny_preset, dataset):
    result = lr_scan.scan(tiny_preset, [1e4], 8, dataset.train.images, dataset.train.labels,
                          dataset.test.images, dataset.test.labels)
    assert result["runs"][0]["steps"] <= 8


def test_init_compare_command(tmp_path, tiny_preset, dataset, capsys):
    assert main(["init-compare", "--preset", tiny_preset, "--steps", "14", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "normal" in out and "kaiming-uniform" in out and "batch 12" in out
    doc = json.loads((tmp_path / "init-compare.json").read_text())
    assert set(doc["runs"]) == set(init_compare.INITS)
    assert all(len(r["grad_norm"]) == 14 and r["at_batch_12"] == r["grad_norm"][11] for r in doc["runs"].values())
    assert (tmp_path / "init-compare.png").stat().st_size > 1000
