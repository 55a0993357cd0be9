"""litenet-infer end to end: human and JSON output, the schema, exit codes, bad inputs, bad models, the Pi-like install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from litenet.errors import LiteNetError
from litenet.runtime import cli, records
from litenet.runtime.model_files import ModelFiles
from litenet.runtime.onnxruntime_backend import OnnxRuntimeInference

from runtime_fixtures import bomb_png, fx, pi_install_script, png_bytes

REPO = Path(__file__).resolve().parents[2]
RECORD_KEYS = {"schema", "image", "ok", "class", "index", "score", "topk", "logits", "backend", "precision",
               "model", "batch", "latency_ms"}


def infer(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_human_output(capsys, model_dir, png_folder):
    code, out, err = infer(capsys, png_folder / "good_0.png", "--model", model_dir)
    assert code == 0 and err == ""
    line, = out.splitlines()
    name, rest = line.split(": ", 1)
    assert name == str(png_folder / "good_0.png")
    cls, score, tail = rest.split(" ", 2)
    assert cls in fx.CLASSES and 0 < float(score) <= 1
    assert tail.startswith("[onnxruntime fp32, ") and tail.endswith(" ms]")


def test_json_schema_and_values(capsys, model_dir, png_folder, test_images):
    code, out, _ = infer(capsys, png_folder, "--model", model_dir, "--json", "--topk", "3")
    rows = json_lines(out)
    assert code == 0 and len(rows) == 5
    expected = OnnxRuntimeInference(ModelFiles.locate(model_dir), "fp32").predict(test_images[:5])
    for i, r in enumerate(rows):
        assert set(r) == RECORD_KEYS and r["schema"] == records.SCHEMA == "litenet-infer/1"
        assert r["image"] == str(png_folder / f"good_{i}.png") and r["ok"] is True
        assert r["backend"] == "onnxruntime" and r["precision"] == "fp32" and r["model"] == str(model_dir)
        assert r["batch"] == 5 and r["latency_ms"] >= 0
        np.testing.assert_array_equal(np.float32(r["logits"]), expected[i])  # exact: floats keep every digit
        z = np.float64(r["logits"])
        soft = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        assert [t["index"] for t in r["topk"]] == list(np.argsort(-z, kind="stable")[:3])
        assert r["index"] == r["topk"][0]["index"] and r["class"] == fx.CLASSES[r["index"]]
        assert r["score"] == pytest.approx(soft.max(), abs=1e-12)
        assert [t["class"] for t in r["topk"]] == [fx.CLASSES[t["index"]] for t in r["topk"]]


def test_topk_in_human_output(capsys, model_dir, png_folder):
    _, out, _ = infer(capsys, png_folder / "good_1.png", "--model", model_dir, "--topk", "3")
    ranked = out.split(": ", 1)[1].split(" [")[0].split(", ")
    assert len(ranked) == 3
    scores = [float(r.split(" ")[1]) for r in ranked]
    assert scores == sorted(scores, reverse=True)


def test_batch_size_does_not_change_results(capsys, model_dir, png_folder):
    _, out1, _ = infer(capsys, png_folder, "--model", model_dir, "--json", "--batch-size", "1")
    _, out5, _ = infer(capsys, png_folder, "--model", model_dir, "--json", "--batch-size", "2")
    a, b = json_lines(out1), json_lines(out5)
    assert [r["batch"] for r in a] == [1] * 5 and [r["batch"] for r in b] == [2, 2, 2, 2, 1]
    for x, y in zip(a, b):
        assert x["class"] == y["class"]
        np.testing.assert_allclose(x["logits"], y["logits"], atol=1e-5, rtol=0)


def test_int8(capsys, model_dir, png_folder):
    code, out, _ = infer(capsys, png_folder, "--model", model_dir, "--json", "--precision", "int8")
    assert code == 0 and {r["precision"] for r in json_lines(out)} == {"int8"}
    code, out, _ = infer(capsys, png_folder / "good_0.png", "--model", model_dir / "model.int8.onnx", "--json")
    assert code == 0 and json_lines(out)[0]["precision"] == "int8"  # an int8 file implies int8


def test_one_bad_image_among_good_ones(capsys, model_dir, png_folder):
    (png_folder / "good_2.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"broken")
    code, out, err = infer(capsys, png_folder, png_folder / "absent.png", "--model", model_dir, "--json")
    rows = json_lines(out)
    assert code == cli.EXIT_SOME_FAILED == 1
    assert [r["ok"] for r in rows] == [True, True, False, True, True, False]
    assert rows[2] == {"schema": "litenet-infer/1", "image": str(png_folder / "good_2.png"), "ok": False,
                       "error": rows[2]["error"]}
    assert rows[2]["error"].startswith(str(png_folder / "good_2.png"))
    errors = err.splitlines()
    assert len(errors) == 2 and all(e.startswith("litenet-infer: error: ") for e in errors)
    assert "good_2.png" in errors[0] and "absent.png: no such file" in errors[1]


def test_bomb_and_truncated_files_in_human_mode(capsys, model_dir, png_folder, tmp_path):
    (tmp_path / "bomb.png").write_bytes(bomb_png(9000, 9000))
    data = png_bytes(Image.fromarray(fx.images(1)[0]).resize((64, 64)))
    (tmp_path / "cut.png").write_bytes(data[:len(data) // 2])
    code, out, err = infer(capsys, png_folder / "good_0.png", tmp_path / "bomb.png", tmp_path / "cut.png",
                           "--model", model_dir)
    assert code == 1 and len(out.splitlines()) == 1
    assert "bomb.png: refused" in err and "cut.png: damaged" in err and len(err.splitlines()) == 2


@pytest.mark.parametrize("argv,match", [
    (["--model", "{tmp}/absent"], "no such model file or folder; pass --model"),
    (["--model", "{tmp}/text/model.onnx"], "not a loadable ONNX model"),
    (["--model", "{tmp}/text"], "not a loadable ONNX model"),
    (["--model", "{model}/model.onnx", "--precision", "int8"], "has no int8 model"),
])
def test_model_and_backend_errors_are_one_line(capsys, tmp_path, model_dir, png_folder, argv, match):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "model.onnx").write_text("hello\n")
    argv = [a.format(tmp=tmp_path, model=model_dir) for a in argv]
    code, out, err = infer(capsys, png_folder / "good_0.png", *argv)
    assert code == cli.EXIT_MODEL == 3 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("litenet-infer: error: ") and match in err


def test_a_backend_this_machine_cannot_run_is_status_4(capsys, model_dir, png_folder):
    code, out, err = infer(capsys, png_folder / "good_0.png", "--model", model_dir, "--backend", "tensorrt")
    assert code == 4 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("litenet-infer: error: backend tensorrt cannot run here")


def test_usage_errors(capsys, model_dir, png_folder):
    code, _, err = infer(capsys, png_folder, "--model", model_dir, "--topk", "0")
    assert code == cli.EXIT_USAGE == 2 and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as exc:
        cli.main(["--backend", "opencl", str(png_folder)])
    assert exc.value.code == 2


def test_verbose_explains_the_choice(capsys, model_dir, png_folder):
    code, _, err = infer(capsys, png_folder / "good_0.png", "--model", model_dir, "--verbose")
    assert code == 0
    assert f"backend tensorrt: not used ({model_dir} has no model.int8.engine" in err
    assert "backend cuda: not used (" in err and "backend onnxruntime: chosen" in err
    assert "1 intra-op thread(s)" in err


def test_nothing_readable(capsys, model_dir, tmp_path):
    (tmp_path / "a.png").write_text("text")
    code, out, err = infer(capsys, tmp_path / "a.png", "--model", model_dir)
    assert code == 1 and out == "" and "a.png" in err


# --- the Raspberry Pi install: no trainer, exporter, onnx, CuPy, tqdm or matplotlib -----------------

BLOCKER = pi_install_script("litenet.runtime.cli")


def test_runs_without_trainer_exporter_onnx_cupy(model_dir, png_folder, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", BLOCKER, str(png_folder / "good_0.png"), "--model", str(model_dir),
                             "--json", "--backend", "auto", "--verbose"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)
    assert row["ok"] and row["backend"] == "onnxruntime"
    assert "backend cuda: not used" in result.stderr


def test_runtime_sources_import_nothing_forbidden():
    """A static guard beside the subprocess test: no runtime module imports a forbidden package, even lazily."""
    import ast

    forbidden = ("litenet.train", "litenet.export", "onnx", "tqdm", "matplotlib", "torch")
    for path in (REPO / "litenet" / "runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad = [n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)]
            assert not bad, f"{path.name} imports {bad}"


def test_module_entry_point(model_dir, png_folder):
    result = subprocess.run([sys.executable, "-m", "litenet.runtime", str(png_folder / "good_0.png"),
                             "--model", str(model_dir)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert result.returncode == 0 and result.stdout.count("\n") == 1


def test_an_export_of_older_weights_is_refused(capsys, model_dir, png_folder, tmp_path):
    """Training again into an exported folder replaces weights.safetensors but not the ONNX files or the plan."""
    import shutil

    from litenet.runtime import cuda_net

    folder = tmp_path / "retrained"
    shutil.copytree(model_dir, folder)
    assert infer(capsys, png_folder / "good_0.png", "--model", folder)[0] == 0  # as exported: served
    fx.write_model(folder, fx.SHAPES["full-shift"], seed=99)  # what litenet train --out folder writes
    for precision in ("fp32", "int8"):
        code, out, err = infer(capsys, png_folder / "good_0.png", "--model", folder, "--precision", precision,
                               "--backend", "onnxruntime")
        assert code == cli.EXIT_MODEL and out == "" and len(err.splitlines()) == 1
        assert "exported from other weights than" in err and f"litenet export --weights {folder} --int8" in err
    with pytest.raises(LiteNetError, match="exported from other weights"):
        cuda_net.load_int8(ModelFiles.locate(folder))  # the CUDA backend's int8 input (its fp32 reads the weights)
    # one exported file given alone has no weights beside it to disagree with
    assert infer(capsys, png_folder / "good_0.png", "--model", folder / "model.onnx")[0] == 0


def test_damaged_weights_are_named_not_taken_for_a_retraining(capsys, model_dir, png_folder, tmp_path):
    import shutil

    folder = tmp_path / "damaged"
    shutil.copytree(model_dir, folder)
    (folder / "weights.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    code, out, err = infer(capsys, png_folder / "good_0.png", "--model", folder, "--backend", "onnxruntime")
    assert code == cli.EXIT_MODEL and out == "" and len(err.splitlines()) == 1
    assert f"{folder / 'weights.safetensors'}: unreadable weights file" in err
    assert "exported from other weights" not in err and "trained again" not in err
