"""Which model a command uses when --model is not given: the user's newest finished run, else the best shipped model.

litenet-infer, `litenet eval` and `litenet explain` all ask here, and all say on stderr, in one
line, which model they scored and why, so a number is never read against the wrong model.

A run counts when it has finished (config.json: epochs_done = train.epochs) and holds what the
command reads: its exported ONNX files, as fresh as its weights, for litenet-infer; its weights for
eval and explain. Among the shipped models (models/<name>/) a Mixer goes first, then the higher
test accuracy: the Mixer is the stronger family at every size LiteNet ships.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from litenet.errors import LiteNetError

RUNS_DIR = Path("runs")  # where litenet train and make train write (relative to the working directory)
CONFIG = "config.json"
WEIGHTS = "weights.safetensors"
ONNX_FILES = ("model.onnx", "model.int8.onnx")
NEEDS = ("onnx", "weights")  # what the command reads: litenet-infer the exports, eval and explain the weights


@dataclass(frozen=True)
class ModelChoice:
    """The folder (or file) a command will use and the words that say why."""

    path: Path
    why: str

    def line(self, prog: str) -> str:
        """The one line a command prints on stderr before it starts."""
        return f"{prog}: model {self.path} ({self.why})"


def choose_model(given: str | Path | None, needs: str, runs_dir: Path = RUNS_DIR) -> ModelChoice:
    """--model when given; else the newest finished run under `runs_dir`; else the best shipped model."""
    if needs not in NEEDS:
        raise ValueError(needs)
    if given is not None:
        return ModelChoice(Path(given), "given with --model")
    runs, unexported = finished_runs(runs_dir, needs)
    if runs:
        folder, doc = runs[0]
        return ModelChoice(folder, f"your newest finished run: {_summary(doc)}; --model picks another")
    shipped = shipped_models(needs)
    if not shipped:
        raise LiteNetError("no model to use: no finished run under runs/ and no shipped model in models/; "
                           "train one (`make train`) or pass --model with a trained folder")
    folder, doc = shipped[0]
    hint = ""
    if unexported:  # the user's run would have been chosen: say what it lacks
        hint = f"; {unexported} is not exported yet: `litenet export --weights {unexported} --int8`"
    return ModelChoice(folder, f"the best shipped model: {_summary(doc)}{hint}; --model picks another")


def finished_runs(runs_dir: Path, needs: str) -> tuple[list[tuple[Path, dict]], Path | None]:
    """(the finished runs usable for `needs`, newest first; the newest finished run that lacks fresh exports)."""
    found = []
    for config in Path(runs_dir).glob(f"*/{CONFIG}"):
        doc = _read(config)
        weights = config.parent / WEIGHTS
        if doc is None or not weights.is_file() or not _finished(doc):
            continue
        found.append((weights.stat().st_mtime, config.parent, doc))
    found.sort(key=lambda item: item[0], reverse=True)
    usable = [(folder, doc) for when, folder, doc in found if needs == "weights" or _exported(folder, when)]
    newest_unexported = found[0][1] if found and not (usable and usable[0][0] == found[0][1]) else None
    return usable, newest_unexported


def shipped_models(needs: str) -> list[tuple[Path, dict]]:
    """The models in LiteNet's models/ folder that hold what `needs`, best first (a Mixer, then accuracy)."""
    from litenet.resources import models_dir

    try:
        root = models_dir()
    except FileNotFoundError:
        return []
    found = []
    for config in root.glob(f"*/{CONFIG}"):
        doc = _read(config)
        folder = config.parent
        has = (folder / WEIGHTS).is_file() if needs == "weights" else any((folder / n).is_file() for n in ONNX_FILES)
        if doc is not None and has:
            found.append((folder, doc))
    return sorted(found, key=lambda item: (_family(item[1]) == "mixer", item[1].get("test_accuracy") or 0.0),
                  reverse=True)


def _summary(doc: dict) -> str:
    accuracy = doc.get("test_accuracy")
    shown = f", {100 * accuracy:.2f} % test accuracy" if isinstance(accuracy, (int, float)) else ""
    return f"{doc.get('preset', 'unknown preset')}{shown}"


def _finished(doc: dict) -> bool:
    planned = (doc.get("train") or {}).get("epochs")
    return planned is not None and doc.get("epochs_done") == planned


def _exported(folder: Path, weights_time: float) -> bool:
    files = [folder / n for n in ONNX_FILES if (folder / n).is_file()]
    return bool(files) and all(f.stat().st_mtime >= weights_time for f in files)


def _family(doc: dict) -> str:
    model = doc.get("model")
    return model.get("family", "mlp") if isinstance(model, dict) else "mlp"


def _read(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
