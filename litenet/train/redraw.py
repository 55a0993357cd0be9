"""The training figures redrawn during a run by a child process, while the loop goes on.

Drawing holds the interpreter for about a second, so a thread that draws holds the training loop too
(docs/decisions.md, "Process overhead"); a child process draws on another core, at the lowest priority.
Each redraw is one `python -m litenet.train.redraw COLUMNS FOLDER` over the run's columns pickled to a
temporary file, in memory where the system has /dev/shm (a fresh interpreter, so nothing of the parent's
is run again, as multiprocessing's spawn would run an unguarded script). One drawing at a time: a redraw
asked for while one is in flight is skipped, since the next will show more. A redraw that fails in the
child is dropped: the trainer draws the last figures itself, at the end, where any error is raised.
Without matplotlib the redraws are left to the end too.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from litenet.train.monitors import RunLog

CHILD_SECONDS = 120  # longer than any drawing takes: close() ends a child still running then
# Drawing needs no thread pools; the trainer's threads keep the cores.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def _memory_folder() -> str | None:
    """A folder in memory for the columns handed over (no disk write-back beside the trainer's writes)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def draw_figures(run: RunLog, folder: Path) -> None:
    """curves.png and gradients.png of `run` in `folder`."""
    from litenet.train.plots import plot_gradients, plot_training

    plot_training(run, Path(folder) / "curves.png")
    plot_gradients(run, Path(folder) / "gradients.png")


class Redrawer:
    """Redraws `folder`'s figures in a child process (module docstring)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.available = importlib.util.find_spec("matplotlib") is not None
        self._child: subprocess.Popen | None = None
        self._columns: Path | None = None

    @property
    def busy(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def submit(self, run: RunLog) -> bool:
        """Start a child drawing `run`, unless one is drawing or none can; whether it started."""
        if not self.available or self.busy:
            return False
        self.close()
        try:
            fd, name = tempfile.mkstemp(prefix="litenet-redraw-", suffix=".pickle", dir=_memory_folder())
            self._columns = Path(name)
            with os.fdopen(fd, "wb") as f:
                pickle.dump(run, f, protocol=pickle.HIGHEST_PROTOCOL)
            env = dict(os.environ, **ONE_THREAD)
            # the child imports this litenet, wherever the parent found it
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
            self._child = subprocess.Popen([sys.executable, "-m", "litenet.train.redraw", name, str(self.folder)],
                                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:  # a full temporary folder, no interpreter to start: the redraws wait for the end
            self.available = False
            self.close()
            return False
        return True

    def close(self) -> None:
        """Wait for the drawing in flight (ending a child that outlives CHILD_SECONDS); remove its columns."""
        child, self._child = self._child, None
        if child is not None:
            try:
                child.wait(timeout=CHILD_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self._columns is not None:
            self._columns.unlink(missing_ok=True)
            self._columns = None


def main(argv: list[str]) -> int:
    if hasattr(os, "nice"):
        os.nice(19)  # the trainer's process comes first on a busy host
    columns, folder = Path(argv[0]), Path(argv[1])
    with open(columns, "rb") as f:
        run = pickle.load(f)
    draw_figures(run, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
