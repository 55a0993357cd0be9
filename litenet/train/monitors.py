"""Training monitors read back from metrics.jsonl: per-layer norms, clip rate, update ratios, residual path shares.

The backends log, per step and per residual block, three sums over the batch (backends.STAT_FIELDS):
S = ‖∂s‖² (what reaches the block input through the identity path), M = ‖∂x_main‖² (through the
main path, ∂u W1ᵀ) and C = ⟨∂s, ∂x_main⟩. Every share below is a function of those three numbers;
docs/insight.md defines them and says which one the figures draw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.train.checkpoint import METRICS_FILE, read_metrics

# The seed's thresholds are cross-entropy values; ln 10 is the cross-entropy of a uniform guess,
# so "loss > 2.0" means "above 2.0 / ln 10 = 87 % of the starting loss" and "< 0.5" means 22 %.
CE_START = float(np.log(10.0))
EARLY_LOSS, LATE_LOSS = 2.0, 0.5
PHASE_WINDOW = 50  # steps in the trailing mean that decides a step's phase (a batch loss is noisy)


@dataclass
class RunLog:
    """One training run's metrics as arrays: one row per step, per logged chunk, or per epoch."""

    folder: Path
    params: list[str]
    loss_name: str  # "margin" or "cross-entropy" (from config.json; "cross-entropy" when unknown)
    steps_per_epoch: int
    step: np.ndarray
    lr: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    clipped: np.ndarray  # bool
    grad_norms: np.ndarray  # (steps, tensors) ‖g‖ per tensor, before clipping
    path: np.ndarray  # (steps, blocks, 3) S, M, C
    chunk_step: np.ndarray  # the last step of each logged chunk
    chunk_len: np.ndarray  # steps in that chunk
    update_ratio: np.ndarray  # (chunks, tensors) ‖w_end − w_start‖ / ‖w_start‖, NaN where undefined
    weight_norms: np.ndarray  # (chunks, tensors) ‖w_end‖
    epochs: list[dict] = field(default_factory=list)
    residuals: list[str] = field(default_factory=list)  # the name of each residual the path sums are of

    @property
    def blocks(self) -> int:
        return self.path.shape[1]


def read_run(folder_or_file: str | Path) -> RunLog:
    """Read a model folder's metrics.jsonl (and the loss name from its config.json)."""
    path = Path(folder_or_file)
    metrics = path / METRICS_FILE if path.is_dir() else path
    if not metrics.is_file():
        raise LiteNetError(f"{metrics}: no training metrics; point at a folder written by litenet train")
    columns = RunColumns(metrics)
    columns.add(read_metrics(metrics))
    return columns.log()


class RunColumns:
    """A RunLog gathered record by record. The trainer hands it each record it writes, so its figures
    are redrawn from arrays already in memory: parsing metrics.jsonl again (78 MB after the Mixer's
    100 epochs) took longer than drawing."""

    def __init__(self, metrics: Path):
        self.metrics = Path(metrics)  # the file the records are (or will be) in
        self.run: dict | None = None  # the last "run" record: the parameters' names, the blocks
        self.epochs: list[dict] = []
        self._parts: list[dict[str, np.ndarray]] = []  # one per add() that held steps

    def add(self, records: list[dict]) -> None:
        steps = []
        for record in records:
            kind = record.get("type")
            if kind == "step":
                steps.append(record)
            elif kind == "epoch":
                self.epochs.append(record)
            elif kind == "run":
                self.run = record
        if steps:
            if self.run is None:
                raise LiteNetError(f"{self.metrics}: step records before any run record")
            self._parts.append(_step_columns(steps, len(self.run["params"])))

    def log(self) -> RunLog:
        if self.run is None or not self._parts:
            raise LiteNetError(f"{self.metrics}: holds no training steps yet; train for a few steps first")
        if len(self._parts) > 1:  # joined once here, so the next call joins only what came after
            self._parts = [{key: np.concatenate([part[key] for part in self._parts]) for key in self._parts[0]}]
        columns = self._parts[0]
        loss_name = "cross-entropy"
        config = self.metrics.parent / "config.json"
        if config.is_file():
            loss_name = json.loads(config.read_text(encoding="utf-8")).get("train", {}).get("loss", loss_name)
        return RunLog(folder=self.metrics.parent, params=list(self.run["params"]), loss_name=loss_name,
                      residuals=list(self.run.get("residuals") or []),
                      steps_per_epoch=int(self.run["steps_per_epoch"]), epochs=list(self.epochs), **columns)


def _step_columns(steps: list[dict], tensors: int) -> dict[str, np.ndarray]:
    """The RunLog arrays of some step records; `tensors` wide where a record holds one value per tensor."""
    chunks = [r for r in steps if "update_ratio" in r]  # the last step of a chunk; older runs have none

    def column(key, rows=steps, dtype=np.float64):
        return np.array([r[key] for r in rows], dtype=dtype)

    def nan_matrix(key):
        return np.array([[np.nan if v is None else v for v in r[key]] for r in chunks], np.float64).reshape(
            len(chunks), tensors)

    return dict(step=column("step", dtype=np.int64), lr=column("lr"), loss=column("loss"),
                grad_norm=column("grad_norm"), clipped=column("clipped", dtype=bool),
                grad_norms=column("grad_norms"),
                path=column("path").reshape(len(steps), -1, 3),
                chunk_step=column("step", chunks, np.int64), chunk_len=column("update_steps", chunks, np.int64),
                update_ratio=nan_matrix("update_ratio"), weight_norms=nan_matrix("weight_norms"))


# ---------------------------------------------------------------------------------------------
# Residual path shares


def path_shares(sums) -> dict[str, np.ndarray]:
    """Shares of ∂L/∂x from the sums (..., 3) = (S, M, C): by norm and by projection onto ∂x.

    norm:        side = √S / (√S + √M),  main = 1 − side           (both in [0, 1])
    projection:  side = ⟨∂s, ∂x⟩ / ‖∂x‖² = (S + C) / (S + M + 2C),  main = (M + C) / (S + M + 2C)
                 (they add up to 1; one can exceed 1 when the paths cancel each other)
    """
    sums = np.asarray(sums, np.float64)
    s, m, c = sums[..., 0], sums[..., 1], sums[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        side_norm = np.sqrt(s) / (np.sqrt(s) + np.sqrt(m))
        total = s + m + 2 * c  # = ‖∂s + ∂x_main‖²
        side_proj = (s + c) / total
        main_proj = (m + c) / total
    return {"side_norm": side_norm, "main_norm": 1 - side_norm, "side_proj": side_proj, "main_proj": main_proj}


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at each position (fewer at the start)."""
    csum = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(0, idx - window)
    return (csum[idx] - csum[lo]) / (idx - lo)


def phases(run: RunLog) -> dict[str, dict]:
    """The steps of the seed's "early" (loss > 2.0) and "late" (loss < 0.5) phases, as boolean masks.

    A step belongs to a phase by the trailing mean of PHASE_WINDOW batch losses. For the margin
    loss, whose values never reach 2, the thresholds are taken as fractions of the starting loss
    (the mean of the first 10 steps): 2.0 / ln 10 and 0.5 / ln 10 of it, which for cross-entropy
    are exactly 2.0 and 0.5. When no step is that low, "late" is the last epoch's steps (said so).
    """
    smooth = trailing_mean(run.loss, PHASE_WINDOW)
    if run.loss_name == "cross-entropy":
        early_at, late_at, rule = EARLY_LOSS, LATE_LOSS, "loss thresholds 2.0 / 0.5 (cross-entropy)"
    else:
        start = float(np.mean(run.loss[:10]))
        early_at, late_at = start * EARLY_LOSS / CE_START, start * LATE_LOSS / CE_START
        rule = f"margin loss: {EARLY_LOSS}/ln 10 and {LATE_LOSS}/ln 10 of the starting loss {start:.3f}"
    early = smooth > early_at
    late = smooth < late_at
    late_rule = f"trailing-mean loss < {late_at:.3g}"
    if not late.any():
        late = run.step >= run.step.max() + 1 - run.steps_per_epoch
        late_rule = f"no step reached {late_at:.3g}; the last epoch instead (trailing-mean loss ≥ {smooth[late].min():.3g})"
    return {"early": {"mask": early, "rule": f"trailing-mean loss > {early_at:.3g}", "threshold": early_at},
            "late": {"mask": late, "rule": late_rule, "threshold": late_at}, "mapping": rule}


def phase_table(run: RunLog) -> list[dict]:
    """Per block and phase: steps, loss range and the mean per-step shares (norm and projection)."""
    shares = path_shares(run.path)
    rows = []
    found = phases(run)
    for name in ("early", "late"):
        mask = found[name]["mask"]
        for block in range(run.blocks):
            row = {"phase": name, "block": block, "rule": found[name]["rule"], "steps": int(mask.sum())}
            if mask.any():
                row.update(first_step=int(run.step[mask][0]), last_step=int(run.step[mask][-1]),
                           loss_mean=float(run.loss[mask].mean()),
                           **{k: float(np.nanmean(v[mask, block])) for k, v in shares.items()})
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Per-layer views, clip rate


def layer_tensors(params: list[str]) -> list[tuple[int, str]]:
    """(index, short label) of each layer's main tensor: weight matrices and LayerNorm γ (not biases, β)."""
    shown = []
    for i, name in enumerate(params):
        if name.endswith(".weight") or name.endswith(".gamma"):
            label = name.replace("blocks.", "b").replace(".weight", "").replace(".gamma", " γ")
            shown.append((i, label))
    return shown


def clip_rate(clipped: np.ndarray, window: int) -> np.ndarray:
    """Fraction of the last `window` steps on which the clip rule fired."""
    return trailing_mean(np.asarray(clipped, np.float64), window)


def per_step_update_ratio(run: RunLog) -> np.ndarray:
    """Each chunk's update ratio divided by its length: the mean net move per step, ‖Δw‖ / (k ‖w‖)."""
    return run.update_ratio / np.maximum(run.chunk_len, 1)[:, None]
