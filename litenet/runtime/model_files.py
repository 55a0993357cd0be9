"""ModelFiles: the files of one model (a folder written by litenet train + export, or a single model file) and its class names."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from litenet.errors import LiteNetError
from litenet.paths import check_reachable

# The names litenet train and litenet export write (litenet/weights.py, litenet/export/pipeline.py,
# litenet/export/tensorrt.py); repeated here because the runtime may not import the exporter.
FP32_ONNX = "model.onnx"
INT8_ONNX = "model.int8.onnx"
PLAN = "model.int8.plan.safetensors"
ENGINE = "model.int8.engine"
ENGINE_INFO = "model.int8.engine.json"
WEIGHTS = "weights.safetensors"
CONFIG = "config.json"
DEFAULT_MODEL = "litenet-base"
PRECISIONS = ("fp32", "int8")
# A single file given with --model: which slot it fills.
FILE_ROLES = {FP32_ONNX: "fp32_onnx", INT8_ONNX: "int8_onnx", PLAN: "plan", ENGINE: "engine", WEIGHTS: "weights"}
MODEL_HINT = "pass --model with a folder written by `litenet train` + `litenet export --int8` (or one of its model files)"


@dataclass
class ModelFiles:
    """Where each file of a model is (None when absent), plus its folder's config.json, read lazily."""

    source: Path  # what the user gave (or the shipped default)
    folder: Path
    fp32_onnx: Path | None = None
    int8_onnx: Path | None = None
    plan: Path | None = None
    engine: Path | None = None
    engine_info: Path | None = None
    weights: Path | None = None
    config: Path | None = None
    single_file: bool = False
    _classes: tuple[str, ...] | None = field(default=None, repr=False)
    _weights_sha256: str | None = field(default=None, repr=False)

    @classmethod
    def locate(cls, path: str | Path | None = None) -> ModelFiles:
        """A model folder → its files; one model file → that file alone; None → the shipped model."""
        if path is None:
            return cls.shipped()
        path = Path(path)
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):  # its files would all look absent
                raise PermissionError(errno.EACCES, "permission denied", str(path))
            found = {role: path / name for name, role in FILE_ROLES.items() if (path / name).is_file()}
            info = path / ENGINE_INFO
            files = cls(source=path, folder=path, **found, engine_info=info if info.is_file() else None,
                        config=path / CONFIG if (path / CONFIG).is_file() else None)
            if not (files.fp32_onnx or files.int8_onnx or files.plan or files.engine):
                raise LiteNetError(f"{path}: no model.onnx or model.int8.onnx in this folder; run "
                                   f"`litenet export --weights {path} --int8` first, or {MODEL_HINT}")
            return files
        if path.is_file():
            role = FILE_ROLES.get(path.name) or _role_by_suffix(path)
            if role is None:
                raise LiteNetError(f"{path}: not a LiteNet model file (expected one of {', '.join(FILE_ROLES)}); "
                                   f"{MODEL_HINT}")
            folder = path.parent
            extra = {}
            if role == "engine" and (folder / ENGINE_INFO).is_file():
                extra["engine_info"] = folder / ENGINE_INFO
            return cls(source=path, folder=folder, single_file=True, **{role: path}, **extra,
                       config=folder / CONFIG if (folder / CONFIG).is_file() else None)
        check_reachable(path)  # a symlink loop or a folder without permission is not "no such file"
        raise LiteNetError(f"{path}: no such model file or folder; {MODEL_HINT}")

    @classmethod
    def shipped(cls) -> ModelFiles:
        """The best model shipped with LiteNet (models/<name>/ in a checkout or a wheel; model_choice.py says which)."""
        from litenet.runtime.model_choice import shipped_models

        shipped = shipped_models("onnx")
        if not shipped:
            raise LiteNetError(f"the shipped model (models/{DEFAULT_MODEL}) is missing (run `make ship-model` in a "
                               f"checkout); or {MODEL_HINT}")
        return cls.locate(shipped[0][0])

    def precisions(self) -> list[str]:
        """The precisions some file of this model provides."""
        out = ["fp32"] if (self.fp32_onnx or self.weights) else []
        return out + (["int8"] if (self.int8_onnx or self.plan or self.engine) else [])

    def default_precision(self) -> str:
        """fp32 when the model has it (the more accurate), else int8 (a single int8 file was given)."""
        available = self.precisions()
        return "fp32" if "fp32" in available or not available else available[0]

    @property
    def classes(self) -> tuple[str, ...]:
        """Class names in logit order: config.json, else the model file's own metadata; () when neither says."""
        if self._classes is None:
            self._classes = self._read_classes()
        return self._classes

    def _read_classes(self) -> tuple[str, ...]:
        if self.config is not None and not self.single_file:
            names = _json_classes(self.config)
            if names:
                return names
        for onnx_path in (self.fp32_onnx, self.int8_onnx):
            if onnx_path is not None:
                names = parse_names(onnx_metadata(onnx_path).get("class_names"))
                if names:
                    return names
        if self.plan is not None:
            names = parse_names(safetensors_metadata(self.plan).get("classes"))
            if names:
                return names
        return _json_classes(self.config) if self.config is not None else ()

    def preset(self) -> str:
        """The preset name recorded in config.json, or "unknown"."""
        if self.config is not None:
            try:
                return str(json.loads(self.config.read_text(encoding="utf-8")).get("preset", "unknown"))
            except (OSError, ValueError, AttributeError):
                pass
        return "unknown"

    def family(self) -> str:
        """The architecture family ("mlp", "mixer") that config.json or the int8 plan records; "mlp" when neither says."""
        docs = []
        try:
            if self.config is not None:
                docs.append(json.loads(self.config.read_text(encoding="utf-8")).get("model"))
            if self.plan is not None:
                docs.append(json.loads(safetensors_metadata(self.plan).get("model", "{}")))
        except (OSError, ValueError, AttributeError, LiteNetError):
            pass
        return next((d["family"] for d in docs if isinstance(d, dict) and "family" in d), "mlp")

    def describe(self) -> str:
        """What the user gave, for messages."""
        return str(self.source)

    def check_same_weights(self, metadata: dict[str, str], path: Path) -> None:
        """Refuse a model file exported from other weights than the weights.safetensors beside it.

        `litenet train --out` into a folder that holds an export replaces the weights but not the
        exported files; serving those would silently answer with the old model. The exporter
        records the weights file's sha256 (`weights_sha256`); files without it are not checked.
        """
        recorded = metadata.get("weights_sha256")
        if not recorded or self.weights is None or self.single_file:
            return
        if self._weights_sha256 is None:
            self._weights_sha256 = file_sha256(self.weights)
        if self._weights_sha256 == recorded:
            return
        try:  # a damaged weights file differs too, but retraining is not what happened to it
            read_safetensors_header(self.weights)
        except (OSError, ValueError, struct.error) as exc:
            raise LiteNetError(f"{self.weights}: unreadable weights file ({exc}), so {path.name} cannot be checked "
                               f"against it; restore it (litenet train writes it) or give --model {path} "
                               "alone") from None
        raise LiteNetError(f"{path} was exported from other weights than {self.weights} beside it (the weights were "
                           f"retrained, replaced or damaged since); re-run `litenet export --weights {self.folder} "
                           "--int8`, or restore the weights it came from")


def _role_by_suffix(path: Path) -> str | None:
    """A renamed model file: .onnx is taken as fp32 unless its name says int8; .engine; .safetensors plans."""
    name = path.name.lower()
    if name.endswith(".onnx"):
        return "int8_onnx" if "int8" in name else "fp32_onnx"
    if name.endswith(".engine"):
        return "engine"
    if name.endswith(".plan.safetensors"):
        return "plan"
    return None


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (the exporter records the weights file's; the runtime compares)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_names(value) -> tuple[str, ...]:
    """A JSON list of class names (text or already parsed) → a tuple; () when absent or malformed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


def _json_classes(config: Path) -> tuple[str, ...]:
    try:
        doc = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        raise LiteNetError(f"{config}: not valid JSON; restore it from the model's folder or re-run litenet train") from None
    return parse_names(doc.get("classes")) if isinstance(doc, dict) else ()


_ONNX_META: dict[Path, dict[str, str]] = {}


def onnx_metadata(path: Path, session=None) -> dict[str, str]:
    """An ONNX model's metadata_props, read by ONNX Runtime (the onnx package is not part of the runtime).

    A caller that already holds a session for `path` passes it, so the file is not parsed twice.
    """
    if path not in _ONNX_META:
        if session is None:
            session = open_session_unoptimized(path)
        _ONNX_META[path] = dict(session.get_modelmeta().custom_metadata_map)
    return _ONNX_META[path]


def open_session_unoptimized(path: Path):
    """A throwaway session for reading metadata: no graph optimisation, so it opens fast."""
    import onnxruntime as ort

    from litenet.runtime.onnx_external import check_external_data

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    check_external_data(path)  # before ONNX Runtime may follow a location out of the folder
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidProtobuf types
        raise not_an_onnx_model(path, exc) from None


def not_an_onnx_model(path: Path, exc: Exception) -> LiteNetError:
    """The one-line error for a file ONNX Runtime cannot load."""
    first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:200]
    return LiteNetError(f"{path}: not a loadable ONNX model ({first}); re-run `litenet export` for this model "
                        f"or {MODEL_HINT}")


def read_safetensors_header(path: Path) -> dict:
    """A safetensors file's JSON header (no safetensors package needed); OSError, ValueError or
    struct.error when the file is not one."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > 100_000_000:
            raise ValueError("header too large")
        try:
            header = json.loads(f.read(length))
        except RecursionError:
            raise ValueError("header nested too deeply") from None
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header


def safetensors_metadata(path: Path) -> dict[str, str]:
    """The string metadata of a safetensors file, from its JSON header (no safetensors package needed)."""
    try:
        header = read_safetensors_header(path)
    except (OSError, ValueError, struct.error) as exc:
        raise LiteNetError(f"{path}: not a readable safetensors file ({exc}); re-run litenet export --int8") from None
    meta = header.get("__metadata__", {})
    return meta if isinstance(meta, dict) else {}
