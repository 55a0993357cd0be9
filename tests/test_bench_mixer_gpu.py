"""bench_mixer_gpu.py's bookkeeping, without a GPU: contender names and their precision, LiteNet set
against each PyTorch contender at the same batch and precision, and the accounting of one-time costs (a
contender's first epoch beyond its usual one — compilation — reported, and the times to the targets
given without it as well, and with its set-up added)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_mixer_gpu import litenet_over_peers, one_time_costs, print_race, race_ratios, settings  # noqa: E402


def history(*epoch_seconds):
    total, out = 0.0, []
    for s in epoch_seconds:
        total += s
        out.append({"train_seconds": total})
    return out


def test_the_first_epochs_compilation_is_counted_once_and_taken_off_the_targets():
    costs = one_time_costs(history(20.0, 1.0, 1.2, 0.9, 1.0), {0.82: 24.1})
    assert costs["usual_epoch_seconds"] == pytest.approx(1.0)  # the median of the epochs after the first
    assert costs["first_epoch_extra_seconds"] == pytest.approx(19.0)
    assert costs["seconds_to_targets_without_first_extra"] == {"0.82": pytest.approx(5.1)}


def test_a_first_epoch_faster_than_usual_costs_nothing_and_one_epoch_tells_nothing():
    assert one_time_costs(history(0.9, 1.0, 1.0), {0.5: 0.9})["first_epoch_extra_seconds"] == 0.0
    assert one_time_costs(history(3.0), {0.5: 3.0}) == {}


def test_a_contender_names_its_precision_and_a_name_that_fits_nothing_is_refused():
    assert settings("torch-graph:fp32") == {"kind": "torch-graph", "precision": "fp32"}
    assert settings("litenet:bf16:recompute") == {"kind": "litenet", "precision": "bf16", "activations": "recompute",
                                                  "branches": "on", "wide": None}
    assert settings("litenet") == {"kind": "litenet", "precision": "fp32", "activations": "keep", "branches": "on",
                                   "wide": None}
    assert settings("litenet:bf16:one-stream")["branches"] == "off"
    assert settings("litenet:bf16:one-stream:64-tiles")["wide"] is False
    assert settings("litenet:bf16:recompute:one-stream")["activations"] == "recompute"
    assert settings("torch-compile")["precision"] == "tf32"  # PyTorch's precision left out: as it always ran
    for bad, says in (("torch-graph:fp16", "PRECISION"), ("torchgraph", "expected one of"),
                      ("torch:bf16:recompute", "PRECISION"), ("litenet:bf16:keep:recompute", "PRECISION"),
                      ("litenet:bf16:two-streams", "PRECISION")):
        with pytest.raises(ValueError, match=says):
            settings(bad)


def row(batch, name, ms=None):
    timed = {"ms_per_step": ms} if ms is not None else {"error": "RuntimeError: capture failed"}
    return {"batch": batch, "contender": name, "precision": settings(name)["precision"], **timed}


def test_litenet_is_set_against_each_peer_of_its_batch_and_precision_that_ran():
    rows = [row(128, "litenet:bf16", 2.0), row(128, "torch-graph:bf16", 4.0), row(128, "torch-graph:fp32", 8.0),
            row(256, "torch-graph:bf16", 5.0), row(128, "torch:bf16"), row(128, "litenet:fp32", 6.0)]
    assert litenet_over_peers(rows) == [
        {"batch": 128, "litenet": "litenet:bf16", "peer": "torch-graph:bf16", "litenet_over_peer": 0.5},
        {"batch": 128, "litenet": "litenet:fp32", "peer": "torch-graph:fp32", "litenet_over_peer": 0.75}]


def run(setup, *epoch_seconds, accuracies):
    h = history(*epoch_seconds)
    for entry, accuracy in zip(h, accuracies):
        entry["test_accuracy"] = accuracy
    reached = {t: next(e["train_seconds"] for e in h if e["test_accuracy"] >= t)
               for t in (0.8, 0.82) if any(e["test_accuracy"] >= t for e in h)}
    return {"history": h, "setup_seconds": setup, "seconds_to_targets": {str(k): v for k, v in reached.items()},
            "seconds_to_targets_with_setup": {str(k): v + setup for k, v in reached.items()},
            "final_accuracy": h[-1]["test_accuracy"], **one_time_costs(h, reached)}


def test_the_race_sets_litenet_against_each_peer_at_the_targets_both_reached(capsys):
    results = {"litenet:bf16": run(1.0, 10.0, 1.0, 1.0, accuracies=[0.7, 0.81, 0.83]),
               "torch-graph:bf16": run(30.0, 2.0, 2.0, 2.0, accuracies=[0.7, 0.75, 0.81]),
               "torch:bf16": {"error": "RuntimeError: out of memory"}}
    ratios = race_ratios(results)
    assert ratios == [{"target": 0.8, "litenet": "litenet:bf16", "peer": "torch-graph:bf16",
                       "training": pytest.approx(11.0 / 6.0), "without_one_time_costs": pytest.approx(2.0 / 6.0),
                       "with_one_time_costs": pytest.approx(12.0 / 36.0)}]
    print_race(results, [0.8, 0.82], ratios)
    out = capsys.readouterr().out
    assert "torch:bf16" in out and "out of memory" in out  # the failed contender is reported, not lost
    assert "83.00 %" in out and "—" in out  # LiteNet's final accuracy; 82 % the peer never reached
