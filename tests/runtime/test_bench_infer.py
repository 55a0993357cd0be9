"""`litenet bench-infer`: the table and the JSON report, the statistics, the rows it plans, what it
skips and why, any model folder, the emulation label, bad settings, and the runtime-only install."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from litenet.cli import main as litenet_main
from litenet.runtime import bench
from litenet.runtime.backends import BACKENDS
from litenet.runtime.model_files import ModelFiles

from runtime_fixtures import PI_BLOCKED, pi_install_script
from video_fixtures import REPO

ROW_KEYS = {"backend", "precision", "threads", "batch", "min_ms", "median_ms", "mean_ms", "p99_ms", "max_ms",
            "images_per_s", "cpu_cores", "runs"}
QUICK = ["--loops", "3", "--warmup", "1", "--cooldown", "0", "--batch", "1", "5", "--quiet"]


def bench_infer(capsys, *argv) -> tuple[int, str, str]:
    code = litenet_main(["bench-infer", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_report_schema(capsys, model_dir):
    code, out, err = bench_infer(capsys, model_dir, *QUICK, "--threads", "1", "2", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == {"schema", "model", "preset", "family", "settings", "machine", "rows", "skipped"}
    assert report["schema"] == bench.SCHEMA == "litenet-bench-infer/1" and report["family"] == "mlp"
    assert set(report["machine"]) == {"cpu", "arch", "logical_cpus", "physical_cores", "os", "gpus", "libraries",
                                      "emulated"}
    assert "onnxruntime" in report["machine"]["libraries"] and report["machine"]["emulated"] is None
    assert [(r["precision"], r["threads"], r["batch"]) for r in report["rows"]] == [
        (p, t, b) for p in ("fp32", "int8") for t in (1, 2) for b in (1, 5)]
    for row in report["rows"]:
        assert set(row) == ROW_KEYS and row["backend"] == "onnxruntime"
        assert row["min_ms"] <= row["median_ms"] <= row["p99_ms"] <= row["max_ms"]
        assert row["min_ms"] <= row["mean_ms"] <= row["max_ms"] and row["cpu_cores"] >= 0
        assert row["images_per_s"] == pytest.approx(row["batch"] * 1e3 / row["mean_ms"])
        assert f"{row['threads']} intra-op thread(s)" in row["runs"]
    # every other backend and precision is accounted for, with the reason it did not run
    assert {(k["backend"], k["precision"]) for k in report["skipped"]} == {
        (b, p) for b in BACKENDS if b != "onnxruntime" for p in ("fp32", "int8")}
    assert all(k["reason"] for k in report["skipped"])


def test_the_table(capsys, model_dir):
    code, out, _ = bench_infer(capsys, model_dir, *QUICK, "--precision", "int8", "--threads", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"litenet bench-infer: {model_dir} (tiny-test, mlp)"
    assert lines[1].startswith("CPU: ") and lines[2].startswith("GPU: ") and lines[3].startswith("Libraries: python ")
    header = next(i for i, line in enumerate(lines) if line.startswith("backend"))
    assert lines[header].split() == ["backend", "precision", "threads", "batch", "min", "median", "mean", "p99", "max",
                                     "images/s", "CPU", "cores"]
    rows = [line.split() for line in lines[header + 1:header + 3]]
    assert [r[:4] for r in rows] == [["onnxruntime", "int8", "1", "1"], ["onnxruntime", "int8", "1", "5"]]
    assert "not run:" in lines and any(line.startswith("  cuda int8: ") for line in lines)


def test_any_model_folder_a_mixer_too(capsys, exported):
    code, out, _ = bench_infer(capsys, exported["mixer-8"], *QUICK, "--threads", "1", "--json")
    report = json.loads(out)
    assert code == 0 and report["family"] == "mixer" and len(report["rows"]) == 4


def test_latency_stats():
    stats = bench.latency_stats([0.001, 0.002, 0.003, 0.010], batch=4)
    assert stats["min_ms"] == pytest.approx(1) and stats["max_ms"] == pytest.approx(10)
    assert stats["median_ms"] == pytest.approx(2.5) and stats["mean_ms"] == pytest.approx(4)
    assert stats["p99_ms"] == pytest.approx(3 + 0.97 * 7)  # linear between the two largest of four
    assert stats["images_per_s"] == pytest.approx(1000)


def test_time_calls_warms_up_then_times_each_call():
    calls = []
    samples, cpu, wall = bench.time_calls(calls.append, "x", warmup=3, loops=5)
    assert len(calls) == 8 and len(samples) == 5 and all(s >= 0 for s in samples) and wall >= sum(samples)


def test_a_backend_without_threads_gets_one_row_per_batch(model_dir):
    """Through a stand-in for a GPU backend: rows come from the registry's classes, threads are not its knob."""
    made = []

    class FakeGpu:
        name = "cuda"
        classes = ("a", "b")

        def __init__(self, model, precision, **options):
            made.append((precision, options))

        def predict(self, images):
            return images[:, 0, 0, :2].astype("float32")

        def describe(self):
            return "a stand-in"

    probe = lambda name, model, precision: (FakeGpu, None) if name == "cuda" else (None, "not here")  # noqa: E731
    settings = bench.Settings(batches=(1, 3), loops=2, warmup=0, cooldown=0)
    report = bench.run(ModelFiles.locate(model_dir), settings, probe=probe)
    assert [(r["backend"], r["precision"], r["threads"], r["batch"]) for r in report["rows"]] == [
        ("cuda", "fp32", None, 1), ("cuda", "fp32", None, 3), ("cuda", "int8", None, 1), ("cuda", "int8", None, 3)]
    assert made == [("fp32", {"threads": None, "max_batch": 3}), ("int8", {"threads": None, "max_batch": 3})]
    assert bench.format_row(report["rows"][0]).split()[:4] == ["cuda", "fp32", "-", "1"]


def test_under_qemu_the_machine_is_labelled_emulated(capsys, model_dir, monkeypatch):
    monkeypatch.setenv("QEMU_CPU", "cortex-a72")
    code, out, _ = bench_infer(capsys, model_dir, *QUICK, "--precision", "fp32", "--threads", "1")
    assert code == 0 and "EMULATED: qemu user-mode emulation of" in out.splitlines()[1]
    assert "(QEMU_CPU=cortex-a72); the times below are the emulator's, not the board's" in out
    code, out, _ = bench_infer(capsys, model_dir, *QUICK, "--threads", "1", "--json", "--emulated", "a Pi 5 profile")
    assert json.loads(out)["machine"]["emulated"] == "a Pi 5 profile"


@pytest.mark.parametrize("argv, message", [
    (["--batch", "0"], "--batch must be 1 … 65536"),
    (["--threads", "1", "0"], "--threads must be 1 … 256"),
    (["--threads", "2000"], "--threads must be 1 … 256"),
    (["--loops", "0"], "--loops must be 1 … 1,000,000, --warmup 0 … 1,000,000"),
    (["--cooldown", "nan"], "--cooldown must be 0 … 3600 seconds"),
])
def test_bad_settings_are_one_line(capsys, model_dir, argv, message):
    code, out, err = bench_infer(capsys, model_dir, *argv)
    assert (code, out, err) == (2, "", f"litenet bench-infer: error: {message}\n")


def test_a_model_that_cannot_run_anywhere_is_one_line(capsys, model_dir, tmp_path):
    code, out, err = bench_infer(capsys, model_dir / "model.onnx", *QUICK, "--precision", "int8")
    assert code == 3 and len(err.splitlines()) == 1 and "no backend could run" in err
    assert "the model has no int8 files" in err
    code, _, err = bench_infer(capsys, tmp_path / "nothing", *QUICK)
    assert code == 3 and len(err.splitlines()) == 1 and "no such model file or folder" in err


# The Pi's install, and no OpenCV either (the video extra): bench-infer needs neither.
BLOCKER = pi_install_script("litenet.cli", PI_BLOCKED + ("litenet.insight", "cv2"))


def test_runs_on_the_runtime_only_install(model_dir, tmp_path):
    """`litenet bench-infer` on what a Raspberry Pi installs: no trainer, exporter, CuPy, OpenCV."""
    result = subprocess.run([sys.executable, "-c", BLOCKER, "bench-infer", str(model_dir), *QUICK, "--json"],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {r["backend"] for r in report["rows"]} == {"onnxruntime"}
    assert [k["precision"] for k in report["skipped"] if k["backend"] == "cuda" and k["reason"]] == ["fp32", "int8"]
