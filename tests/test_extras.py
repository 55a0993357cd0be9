"""Installs without an extra: a command that needs one says so in one line before any work, and a
missing matplotlib costs a finished run only its pictures (one notice line).

A missing package is simulated in a fresh interpreter with sys.modules[name] = None, which makes
both `import name` and importlib.util.find_spec(name) behave as if it were not installed.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runs import REPO, fake_maps
from litenet.cli import COMMANDS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def litenet_without(modules: list[str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`litenet ARGS` in a fresh interpreter in which `modules` cannot be imported."""
    code = ("import sys\n"
            f"for name in {modules!r}:\n    sys.modules[name] = None\n"
            "from litenet.cli import main\n"
            f"sys.exit(main({list(args)!r}))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def maps(tmp_path_factory) -> Path:
    return fake_maps(tmp_path_factory.mktemp("cifar"))


@pytest.mark.parametrize("command, missing, extra", [
    ("train", ["tqdm"], "train"),
    ("train", ["safetensors", "matplotlib"], "train"),
    ("export", ["onnx"], "export"),
    ("eval", ["safetensors"], "train"),
    ("explain", ["matplotlib"], "train"),
    ("data", ["tqdm"], "train"),
    ("studio", ["aiohttp"], "studio"),
])
def test_a_missing_extra_is_one_line_before_any_work(command, missing, extra, maps, tmp_path):
    out = tmp_path / "run"
    args = {"train": ["--epochs", "1", "--maps", str(maps), "--out", str(out)],
            "export": ["--weights", str(out)], "eval": ["--maps", str(maps), "--out", str(out)],
            "explain": ["--grid", "4", "--maps", str(maps), "--out", str(out)], "data": ["--maps", str(out)],
            "studio": ["--no-browser", "--port", "0", "--maps", str(maps), "--out", str(out)]}[command]
    r = litenet_without(missing, command, *args, cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stdout == ""
    needed = [m for m in missing if m in COMMANDS[command].needs]
    assert r.stderr == (f"litenet {command}: needs the {extra} extra ({', '.join(needed)} not installed): "
                        f"pip install 'litenet-nn[{extra}]'\n")
    assert not out.exists()


def test_a_command_that_needs_no_extra_is_not_stopped():
    r = litenet_without(["tqdm", "safetensors", "matplotlib", "onnx"], "gradcheck", "--help")
    assert r.returncode == 0 and "usage: litenet gradcheck" in r.stdout, r.stderr


def test_every_needed_module_comes_with_the_extra_named():
    """The table in litenet/cli.py against pyproject.toml (here every distribution has its module's name)."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {req.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip() for req in extras[extra]}

    for name, command in COMMANDS.items():
        if command.needs:
            assert set(command.needs) <= names(command.extra), (name, command.extra, extras[command.extra])
        else:
            assert command.extra is None, name


def test_without_matplotlib_a_run_finishes_with_one_notice(maps, tmp_path):
    out = tmp_path / "run"
    r = litenet_without(["matplotlib"], "train", "--preset", "litenet-seed", "--epochs", "2", "--batch-size", "16",
                        "--maps", str(maps), "--out", str(out), "--backend", "numpy", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("matplotlib is not installed") == 1, r.stderr
    assert "Traceback" not in r.stderr and "epoch 2/2" in r.stdout
    assert (out / "weights.safetensors").is_file() and (out / "metrics.jsonl").is_file()
    assert not (out / "curves.png").exists()


def test_without_matplotlib_the_figure_writers_skip_their_png(tmp_path):
    code = ("import sys\nsys.modules['matplotlib'] = None\n"
            "import numpy as np\n"
            "from litenet.insight.confusion import render_confusion\n"
            "from litenet.insight.saliency import render_grid\n"
            f"out = {str(tmp_path)!r}\n"
            "assert render_confusion(out + '/c.png', np.eye(2, dtype=int), ['a', 'b'], 't') is False\n"
            "assert render_grid(out + '/g.png', np.zeros((1, 32, 32, 3), np.uint8), np.zeros((1, 32, 32)),"
            " np.array([0]), np.array([0]), ['a'], 't') is False\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "matplotlib is not installed" in r.stderr
    assert list(tmp_path.iterdir()) == []
