"""`litenet train --resume`: the run's recorded settings, and the flags that would change them.

`litenet train --out DIR --resume` alone continues with what DIR's run recorded (preset, every
setting, the number of training images); a flag given with --resume must agree with the record,
else the refusal names each one that differs. --limit counts: fewer or more images change the
steps per epoch, so the schedule would no longer be the one the checkpoint is part of.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from litenet.errors import UsageError
from litenet.model import configs_from_json, inapplicable
from litenet.train.checkpoint import CHECKPOINT_FILE

CONFIG_FILE = "config.json"  # written beside every checkpoint (litenet/weights.py)


def flag(name: str) -> str:
    """The command-line flag of a setting (`lr_base` → `--lr-base`)."""
    return "--" + name.replace("_", "-")


def recorded_run(out: Path) -> dict | None:
    """{"preset", "settings" (every model and train setting), "train" (its TrainConfig), "train_images"} of the run in `out`, or None
    when it holds no checkpoint and config.json to resume from (the trainer then says so in its words)."""
    config = Path(out) / CONFIG_FILE
    if not (Path(out) / CHECKPOINT_FILE).is_file() or not config.is_file():
        return None
    model, train, doc = configs_from_json(config.read_text(encoding="utf-8"), str(config))
    values = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name != "layers"}
    values.update(dataclasses.asdict(train))
    return {"preset": doc.get("preset"), "settings": values, "train": train,
            "train_images": (doc.get("data") or {}).get("train_images")}


def differences(record: dict, preset: str | None, overrides: dict, limit: int | None) -> list[str]:
    """`--flag: recorded X, given Y` for every option given with --resume that the record contradicts."""
    found = []
    if preset is not None and record["preset"] is not None and preset != record["preset"]:
        found.append(f"--preset: recorded {record['preset']}, given {preset}")
    for name, value in overrides.items():
        recorded = record["settings"].get(name)
        if name in record["settings"] and _differ(recorded, value):
            found.append(f"{flag(name)}: recorded {recorded}, given {value}")
    if limit is not None and record["train_images"] is not None and limit != record["train_images"]:
        found.append(f"--limit: recorded {record['train_images']} training images, given {limit} "
                     "(it changes the steps per epoch)")
    return found


def apply_record(args, out: Path) -> None:
    """Fill the options --resume left out from the run's record, or refuse the ones that contradict it."""
    record = recorded_run(out)
    if record is None:
        return
    overrides = {k[4:]: v for k, v in vars(args).items() if k.startswith("set_") and v is not None}
    found = differences(record, args.preset, overrides, args.limit)
    if found:
        raise UsageError(f"{out} was trained with other settings: {'; '.join(found)}. Resume without these "
                         "options (the run's own are used), or use --force to start over")
    if args.preset is None and record["preset"]:
        args.preset = record["preset"]
    for name, value in record["settings"].items():  # every recorded setting, whatever the preset says now,
        # except those the run's recipe did not read: given as flags they would be refused as ignored
        if hasattr(args, f"set_{name}") and not inapplicable(record["train"], name):
            setattr(args, f"set_{name}", value)
    if args.limit is None and record["train_images"] is not None:
        args.limit = record["train_images"]


def _differ(recorded, given) -> bool:
    if isinstance(recorded, float) or isinstance(given, float):
        try:
            return float(recorded) != float(given)
        except (TypeError, ValueError):
            return True
    return json.dumps(recorded) != json.dumps(given)
