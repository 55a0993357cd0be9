"""Training checkpoints: parameters, momentum and position, in one atomically written safetensors file.

One file holds everything a resumed run needs, so a crash can never pair the momentum of one step
with the weights of another. The batch order is a function of (seed, epoch) and the lr of the
global step, so the position alone is enough to continue exactly where training stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet.atomic import atomic_safetensors, atomic_write_text
from litenet.errors import LiteNetError, naming

CHECKPOINT_FILE = "checkpoint.safetensors"
METRICS_FILE = "metrics.jsonl"
FORMAT = "litenet-checkpoint/1"


@dataclass(frozen=True)
class Position:
    """Where training stands: the next epoch to run and the next step inside it."""

    epoch: int
    step_in_epoch: int
    global_step: int


def save_checkpoint(folder: Path, state: dict[str, np.ndarray], position: Position, config_json: str) -> None:
    metadata = {"format": FORMAT, "epoch": str(position.epoch), "step_in_epoch": str(position.step_in_epoch),
                "global_step": str(position.global_step), "config": config_json}
    tensors = {k: np.ascontiguousarray(v) for k, v in state.items()}
    atomic_safetensors(folder / CHECKPOINT_FILE, tensors, metadata)


def load_checkpoint(folder: Path) -> tuple[dict[str, np.ndarray], Position, str]:
    """(state, position, the config JSON it was trained with)."""
    from safetensors import SafetensorError, safe_open
    from safetensors.numpy import load_file

    path = folder / CHECKPOINT_FILE
    if not path.is_file():
        raise LiteNetError(f"{folder}: no {CHECKPOINT_FILE} to resume from; drop --resume to start a new run")
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise LiteNetError(f"{path}: unreadable checkpoint ({exc}); delete it and retrain with --force") from None
    if meta.get("format") != FORMAT or "params" not in state:
        raise LiteNetError(f"{path}: not a LiteNet checkpoint; delete it and retrain with --force")
    try:
        position = Position(int(meta["epoch"]), int(meta["step_in_epoch"]), int(meta["global_step"]))
        config = meta["config"]
    except (KeyError, ValueError) as exc:  # written by something else, or edited by hand
        raise LiteNetError(f"{path}: damaged checkpoint metadata ({exc.__class__.__name__}: {exc}); delete it and "
                           "retrain with --force") from None
    try:
        if not isinstance(json.loads(config), dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError) as exc:
        raise LiteNetError(f"{path}: damaged checkpoint metadata (its config is not a JSON object: {exc}); "
                           "delete it and retrain with --force") from None
    if min(position.epoch, position.step_in_epoch, position.global_step) < 0:
        raise LiteNetError(f"{path}: damaged checkpoint metadata (a negative position); delete it and retrain "
                           "with --force")
    return state, position, config


class MetricsLog:
    """Append-only JSON lines; on resume, records after the checkpoint are dropped first."""

    def __init__(self, folder: Path):
        self.path = folder / METRICS_FILE

    def truncate_after(self, position: Position) -> None:
        """Keep only what happened before `position`, so a resumed run does not log steps twice."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if record.get("type") == "step" and record["step"] >= position.global_step:
                continue
            if record.get("type") == "epoch" and record["epoch"] >= position.epoch:
                continue
            kept.append(line)
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def write(self, records: list[dict]) -> None:
        with naming(self.path), open(self.path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)

    def read(self) -> list[dict]:
        return read_metrics(self.path)


def read_metrics(path: Path) -> list[dict]:
    """Every complete record of a metrics.jsonl file."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
