"""Exported files left in the output folder by an earlier export: kept when they come from the same
weights, removed when they do not, so a folder never pairs this model with another model's int8 files."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

from litenet.export.tensorrt import ENGINE_FILE, ENGINE_INFO_FILE
from litenet.runtime.int8_plan import PLAN_FILE
from litenet.runtime.model_files import read_safetensors_header

FP32_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
SCALES_FILE = "model.int8.scales.json"
# A file that carries no weights_sha256 of its own follows the one it was made with.
FOLLOWS = {SCALES_FILE: INT8_FILE, ENGINE_FILE: ENGINE_INFO_FILE}


def recorded_weights(path: Path) -> str | None:
    """The weights_sha256 that an exported file records; None when it records none or cannot be read."""
    try:
        if path.name.endswith(".onnx"):
            import onnx

            proto = onnx.load(str(path), load_external_data=False)
            return {p.key: p.value for p in proto.metadata_props}.get("weights_sha256")
        if path.name.endswith(".safetensors"):
            meta = read_safetensors_header(path).get("__metadata__", {})
            return meta.get("weights_sha256") if isinstance(meta, dict) else None
        if path.name.endswith(".json"):
            doc = json.loads(path.read_text(encoding="utf-8"))
            return doc.get("weights_sha256") if isinstance(doc, dict) else None
    except (OSError, ValueError, struct.error, AttributeError, Exception):  # noqa: BLE001 - onnx's DecodeError
        return None
    return None


def stale_siblings(folder: Path, written: set[str], weights_sha256: str) -> list[str]:
    """Exported files in `folder` that this export does not rewrite and that come from other weights."""
    present = {name for name in (FP32_FILE, INT8_FILE, SCALES_FILE, PLAN_FILE, ENGINE_FILE, ENGINE_INFO_FILE)
               if name not in written and (folder / name).is_file()}
    stale = {name for name in present if name not in FOLLOWS and recorded_weights(folder / name) != weights_sha256}
    for name, leader in FOLLOWS.items():
        if name in present and (leader in stale or (leader not in present and leader not in written)):
            stale.add(name)
    return sorted(stale)


def remove(folder: Path, names: list[str]) -> None:
    """Delete the stale files (after the new ones are in place)."""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
