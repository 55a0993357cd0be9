"""The error contract of every command (docs/errors.md): usage 2, bad input or model 3, the machine 4;
one line `PROG: error: ...` on stderr, never a traceback; a full disk loses nothing."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_runs import fake_maps  # noqa: E402
from adversarial_helpers import SHIPPED, one_error_line, run_module  # noqa: E402
from litenet.cli import main as litenet_main  # noqa: E402
from litenet.runtime.cli import main as infer_main  # noqa: E402


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    return fake_maps(tmp_path_factory.mktemp("cifar"))


@pytest.fixture
def place(tmp_path):
    """Things a command can be pointed at: a file, a symlink loop, an image, a model folder."""
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tmp_path / "a.png")
    return tmp_path


# (argv after `litenet`, exit status, words the one line holds); {t} is the test's folder, {maps} fake maps
LITENET_CASES = [
    (["train", "--preset", "litenet-seed", "--epochs", "0"], 2, "epochs must be"),
    (["train", "--preset", "litenet-seed", "--blocks", "1000000000"], 2, "blocks must be"),
    (["train", "--preset", "no-such-preset"], 3, "no preset"),
    (["train", "--preset", "litenet-seed", "--maps", "{maps}", "--out", "{t}/a-file", "--epochs", "1"], 4,
     "is not a folder"),
    (["train", "--preset", "litenet-seed", "--maps", "{maps}", "--out", "{t}/a-file/sub", "--epochs", "1"], 4,
     "is a file"),
    (["train", "--preset", "litenet-seed", "--maps", "{maps}", "--out", "{t}/loop/run", "--epochs", "1"], 4,
     "symlink loop"),
    (["train", "--preset", "litenet-seed", "--maps", "{maps}", "--out", "{t}/loop", "--epochs", "1"], 4,
     "symlink loop"),
    (["export", "--weights", "{t}/nowhere"], 3, "no config.json"),
    (["export", "--weights", "{t}/loop"], 4, "symlink loop"),
    (["export", "--weights", str(SHIPPED), "--out", "{t}/loop"], 4, "symbolic links"),
    (["eval", "--model", "{t}/loop"], 4, "symlink loop"),
    (["explain", "--model", "{t}/loop", "{t}/a.png"], 4, "symlink loop"),
    (["export", "--weights", str(SHIPPED), "--out", "{t}/a-file/sub"], 4, "cannot write to"),
    (["export", "--weights", str(SHIPPED), "--int8", "--calib", "1000000000000"], 2, "--calib must be"),
    (["eval", "--model", "{t}/nowhere"], 3, "no such folder"),
    (["explain", "--model", str(SHIPPED)], 2, "give image files"),
    (["data", "--data", "{t}/nowhere", "--maps", "{t}/maps"], 3, "holds no CIFAR-10"),
    (["bench-infer", "--batch", "0"], 2, "--batch must be"),
    (["trace", "--batch", "1000000000000"], 2, "trace 1 … 1024 images"),
    (["trace", "--values", "-1"], 2, "--values -1"),
    (["lr-scan", "--lrs", "nan"], 2, "positive finite"),
    (["init-compare", "--steps", "-1"], 2, "--steps -1"),
    (["gradcheck", "--seed", "-1"], 2, "--seed -1"),
    (["eval", "--limit", "0"], 2, "--limit 0"),
    (["studio", "--blas-threads", "2000", "--no-browser"], 2, "--blas-threads 2000"),
    (["bench-infer", "{t}/nowhere"], 3, "no such model"),
]


@pytest.mark.parametrize("argv, status, words", LITENET_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_every_litenet_command_keeps_the_contract(argv, status, words, place, maps, capsys):
    argv = [a.format(t=place, maps=maps) for a in argv]
    assert litenet_main(argv) == status
    err = capsys.readouterr().err
    notes = ("litenet: using", "litenet: note:")  # what the run says before it fails, on stderr too
    line = one_error_line("\n".join(l for l in err.splitlines() if not l.startswith(notes)), f"litenet {argv[0]}")
    assert words in line


INFER_CASES = [
    (["--topk", "0", "{t}/a.png"], 2, "--topk"),
    (["--threads", "2000", "{t}/a.png"], 2, "at most 256 threads"),
    (["--batch-size", "1000000000000", "--video", "{t}/a.png"], 2, "at most 65536 images"),
    (["--max-latency", "nan", "--video", "{t}/a.png"], 2, "--max-latency must be"),
    (["--model", "{t}/nowhere", "{t}/a.png"], 3, "no such model"),
    (["--model", "{t}/a-file", "{t}/a.png"], 3, "not a LiteNet model file"),
    (["--model", "{t}/loop", "{t}/a.png"], 4, "symlink loop"),
]


@pytest.mark.parametrize("argv, status, words", INFER_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_litenet_infer_keeps_the_contract(argv, status, words, place, capsys):
    assert infer_main([a.format(t=place) for a in argv]) == status
    assert words in one_error_line(capsys.readouterr().err, "litenet-infer")


def test_a_traceback_only_with_litenet_debug(place, monkeypatch):
    monkeypatch.setenv("LITENET_DEBUG", "1")
    from litenet.errors import LiteNetError

    with pytest.raises(LiteNetError):
        litenet_main(["eval", "--model", str(place / "nowhere")])


def test_a_full_stdout_is_one_line_exit_4(place):
    with open("/dev/full", "w") as full:
        r = run_module("litenet.runtime", place / "a.png", stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 4 and "no space left" in one_error_line(r.stderr, "litenet-infer")


@contextlib.contextmanager
def small_disk(folder: Path, free_bytes: int):
    """A tmpfs at `folder` with about `free_bytes` left; skips where mounting is not allowed."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        import os

        stat = os.statvfs(folder)
        (folder / "filler").write_bytes(bytes(max(0, stat.f_bavail * stat.f_frsize - free_bytes)))
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_full_disk_during_training_is_one_line_and_leaves_no_half_file(tmp_path, maps):
    with small_disk(tmp_path / "disk", 48 * 1024) as disk:
        r = run_module("litenet", "train", "--preset", "litenet-seed", "--backend", "numpy", "--maps", maps,
                       "--out", disk / "run", "--epochs", "1", "--no-progress", timeout=120)
        assert r.returncode == 4, r.stderr
        line = one_error_line(r.stderr.splitlines()[-1] + "\n", "litenet train")
        assert "no space left" in line and str(disk / "run") in line and "standard output" not in line, line
        assert not [p.name for p in (disk / "run").iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_during_conversion_leaves_no_maps_and_no_half_folder(tmp_path):
    import errno

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
    from cifar_fakes import make_fake, write_layout
    from litenet.data.conversion import convert

    source = write_layout(tmp_path / "cifar-10-batches-bin", make_fake(64), "binary")
    with small_disk(tmp_path / "disk", 16 * 1024) as disk:
        with pytest.raises(OSError) as caught:  # the CLI prints it as one line, exit 4 (above)
            convert(source, disk / "maps", records_per_batch=64, progress=False)
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(disk / "maps")
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


@contextlib.contextmanager
def read_only_disk(folder: Path):
    """A read-only tmpfs at `folder` (root writes past permissions, not past a read-only mount)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.mark.parametrize("argv", [["export", "--weights", str(SHIPPED), "--out", "{ro}/out"],
                                  ["train", "--preset", "litenet-seed", "--maps", "{maps}", "--out", "{ro}/run",
                                   "--epochs", "1", "--backend", "numpy"]], ids=["export", "train"])
def test_a_read_only_out_is_one_line_exit_4(argv, tmp_path, maps, capsys):
    with read_only_disk(tmp_path / "ro") as ro:
        assert litenet_main([a.format(ro=ro, maps=maps) for a in argv]) == 4
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith(f"litenet {argv[0]}")]
    assert len(err) == 1 and "read-only" in err[0].lower()


def test_a_diverging_run_exits_5_with_its_own_words_not_numpys_warnings(tmp_path, maps):
    r = run_module("litenet", "train", "--preset", "litenet-seed", "--backend", "numpy", "--maps", maps,
                   "--lr-base", "1e30", "--clip-threshold", "1e38", "--warmup-steps", "1", "--epochs", "1",
                   "--no-progress", "--out", tmp_path / "run", timeout=120)
    assert r.returncode == 5, r.stderr
    assert "Warning" not in r.stderr and "the loss became nan" in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["loop", "loop/maps"])
def test_maps_at_a_symlink_loop_name_the_loop(tmp_path, where):
    import errno

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
    from cifar_fakes import make_fake, write_layout
    from litenet.data.conversion import convert

    source = write_layout(tmp_path / "cifar-10-batches-bin", make_fake(64), "binary")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(OSError) as caught:  # the CLI prints it as one line, exit 4
        convert(source, tmp_path / where, records_per_batch=64, progress=False)
    assert caught.value.errno == errno.ELOOP


def test_two_real_trainings_into_one_folder_the_second_is_refused(tmp_path, maps):
    """Two `litenet train` processes: the second, started while the first holds the folder, exits 4 in one
    line; the first trains on and is then stopped as a user would (SIGTERM), releasing the folder."""
    import os
    import signal
    import time

    from litenet.train.run_lock import LOCK_FILE

    out = tmp_path / "run"
    argv = ["train", "--preset", "litenet-seed", "--backend", "numpy", "--maps", maps, "--epochs", "1000",
            "--no-progress", "--out", out]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.Popen([sys.executable, "-m", "litenet", *map(str, argv)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (out / LOCK_FILE).exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (out / LOCK_FILE).exists(), first.communicate(timeout=5)
        second = run_module("litenet", *argv, timeout=60)
        assert second.returncode == 4, second.stderr
        assert "in use by another `litenet train`" in one_error_line(second.stderr, "litenet train")
        assert second.stdout == "" and first.poll() is None  # nothing announced; the first trains on
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode in (0, 130) and not (out / LOCK_FILE).exists()


def test_out_dev_null_is_refused_as_not_a_folder(maps):
    r = run_module("litenet", "train", "--preset", "litenet-seed", "--maps", maps, "--out", "/dev/null",
                   "--epochs", "1")
    assert r.returncode == 4 and "/dev/null: already exists and is not a folder" in r.stderr, r.stderr
