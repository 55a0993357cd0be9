"""Which exported files in a run folder no longer match its weights (the trainer says so when it ends)."""

from __future__ import annotations

import json
from pathlib import Path

from litenet.errors import LiteNetError

# What litenet export writes beside the weights (litenet/export/siblings.py), and where each records
# the weights it was exported from; the trainer does not import the exporter.
EXPORTED_FILES = ("model.onnx", "model.int8.onnx", "model.int8.plan.safetensors", "model.int8.engine")
ENGINE_INFO = "model.int8.engine.json"


def exported_from_other_weights(out: Path, weights: str = "weights.safetensors") -> list[str]:
    """The exported files in `out` whose recorded weights_sha256 is not that of `out/weights` (or unknown)."""
    from litenet.runtime.model_files import file_sha256

    present = [name for name in EXPORTED_FILES if (out / name).is_file()]
    if not present:
        return []
    current = file_sha256(out / weights)
    return [name for name in present if _recorded(out / name) != current]


def _recorded(path: Path) -> str | None:
    from litenet.runtime.model_files import onnx_metadata, safetensors_metadata

    try:
        if path.suffix == ".onnx":
            return onnx_metadata(path).get("weights_sha256")
        if path.name.endswith(".safetensors"):
            return safetensors_metadata(path).get("weights_sha256")
        info = json.loads((path.parent / ENGINE_INFO).read_text(encoding="utf-8"))
        return info.get("weights_sha256") if isinstance(info, dict) else None
    except (OSError, ValueError, LiteNetError):
        return None
