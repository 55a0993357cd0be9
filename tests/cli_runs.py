"""`litenet` as a user runs it, for the CLI tests of training (tests/train) and of its ranks (tests/parallel):
fake CIFAR-10 memory maps, the command as a subprocess, and Ctrl-C followed by --resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from litenet.data.conversion import convert

REPO = Path(__file__).resolve().parents[1]
FAKE_RECORDS = 64  # per batch: 320 training images, 64 test images


def fake_maps(root: Path) -> Path:
    """Memory maps of a fake CIFAR-10 with FAKE_RECORDS records per batch, under `root`."""
    sys.path.insert(0, str(REPO / "tests" / "data"))
    from cifar_fakes import make_fake, write_layout

    src = write_layout(root / "cifar-10-batches-bin", make_fake(FAKE_RECORDS), "binary")
    convert(src, root / "maps", records_per_batch=FAKE_RECORDS, progress=False)
    return root / "maps"


def litenet(*args, **kw) -> subprocess.CompletedProcess:
    """`python -m litenet ARGS` from this checkout, its output captured."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "litenet", *args], capture_output=True, text=True, env=env,
                          timeout=300, **kw)


def interrupt_then_resume(args: list[str], out: Path, steps: int) -> None:
    """Start `litenet ARGS`, Ctrl-C it once its first checkpoint exists (the signal goes to the
    launched process only, as a terminal's would), check that it exits 130 naming --resume, then
    resume and check that the metrics hold every step 0 … steps − 1 exactly once."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "litenet", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not (out / "checkpoint.safetensors").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    r = litenet(*args, "--resume")
    assert r.returncode == 0, r.stderr
    logged = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
              if '"type":"step"' in line]
    assert logged == list(range(steps))
