"""The network's description: frozen configs, TOML presets, the flat parameter layout and seeded initialisation.

Every backend (NumPy, CUDA), the exporter and the runtime read the architecture from here, so a
parameter has one name, one shape and one place in the flat buffer everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from litenet.errors import LiteNetError
from litenet.resources import models_dir

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EMBED_MODES = ("channel-sum", "full")
INIT_MODES = ("kaiming-uniform", "normal")
LOSSES = ("margin", "cross-entropy")
SCHEDULES = ("constant", "cosine")
AUGMENTS = ("none", "flip")


@dataclass(frozen=True)
class ModelConfig:
    """The architecture: embedding → `blocks` dual-path residual blocks → linear head."""

    embed: str = "channel-sum"  # seed: sum R+G+B per pixel, then 1024 → width; "full": 3072 → width
    input_shift: float = 0.0  # subtracted from the [0, 1] pixels inside the embedding (seed: none)
    width: int = 64  # d, the residual stream
    hidden: int = 256  # H, the main path's inner width
    blocks: int = 1
    classes: int = 10
    ln_eps: float = 1e-5
    embed_init: str = "kaiming-uniform"  # "normal" reproduces the seed's N(0, 1) experiment

    def __post_init__(self):
        _check_choice("embed", self.embed, EMBED_MODES)
        _check_choice("embed_init", self.embed_init, INIT_MODES)
        for name in ("width", "hidden", "blocks", "classes"):
            if getattr(self, name) < 1:
                raise LiteNetError(f"model setting {name} must be at least 1, got {getattr(self, name)}")

    @property
    def embed_inputs(self) -> int:
        """Rows of the embedding matrix: 1024 pixels (colours summed) or all 3072 values."""
        return 1024 if self.embed == "channel-sum" else 3072


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation recipe (SPEC.md's seed recipe by default)."""

    epochs: int = 15
    batch_size: int = 64
    lr_base: float = 0.048  # the learning rate at batch 256; lr = lr_base × batch / 256
    momentum: float = 0.9
    weight_decay: float = 1e-4  # added to the gradient of every parameter
    warmup_steps: int = 100  # linear warm-up from lr/warmup_steps to lr
    schedule: str = "constant"  # after warm-up: "constant" or "cosine" (to zero at the last step)
    clip_threshold: float = 10.0  # the seed's rule: when ‖g‖ > clip_threshold ...
    clip_norm: float = 1.0  # ... rescale g to this norm
    loss: str = "margin"
    margin: float = 0.3
    seed: int = 0  # initialisation and the shuffling of every epoch
    augment: str = "none"  # "flip": mirror each training image left-right with probability ½ (opt-in)

    def __post_init__(self):
        _check_choice("loss", self.loss, LOSSES)
        _check_choice("schedule", self.schedule, SCHEDULES)
        _check_choice("augment", self.augment, AUGMENTS)
        if self.batch_size < 1 or self.epochs < 0:
            raise LiteNetError("batch_size must be ≥ 1 and epochs ≥ 0")

    @property
    def lr(self) -> float:
        """The peak learning rate after the linear scaling rule."""
        return self.lr_base * self.batch_size / 256


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise LiteNetError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


# ---------------------------------------------------------------------------------------------
# Presets


@dataclass(frozen=True)
class Preset:
    """A named pair of model and training settings, as read from `models/<name>.toml`."""

    name: str
    model: ModelConfig
    train: TrainConfig
    description: str = ""


def preset_names() -> list[str]:
    return sorted(p.stem for p in models_dir().glob("*.toml"))


def load_preset(name_or_path: str) -> Preset:
    """Read a preset by name (`models/<name>.toml`) or from a TOML file path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = models_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        raise LiteNetError(
            f"no preset {name_or_path!r}; choose one of {', '.join(preset_names())} or give a .toml path"
        )
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LiteNetError(f"{path}: not valid TOML ({exc})") from None
    return Preset(
        name=doc.get("name", path.stem),
        description=doc.get("description", ""),
        model=config_from_dict(ModelConfig, doc.get("model", {}), source=str(path)),
        train=config_from_dict(TrainConfig, doc.get("train", {}), source=str(path)),
    )


def config_from_dict(cls, values: dict[str, Any], source: str = "settings"):
    """Build a config dataclass, refusing unknown keys and values of the wrong type."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise LiteNetError(f"{source}: unknown {cls.__name__} setting(s) {', '.join(unknown)}")
    checked = {k: _coerce(k, v, type(getattr(cls(), k)), source) for k, v in values.items()}
    return cls(**checked)


def override(config, values: dict[str, Any], source: str = "command line"):
    """Return `config` with the given fields replaced (only fields of this config are taken)."""
    mine = {k: v for k, v in values.items() if k in {f.name for f in fields(config)}}
    return dataclasses.replace(config, **{k: _coerce(k, v, type(getattr(config, k)), source) for k, v in mine.items()})


def _coerce(name: str, value: Any, kind: type, source: str):
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is not bool and isinstance(value, str) and kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise LiteNetError(f"{source}: {name} must be {kind.__name__}, got {value!r}")
    return value


def configs_to_json(model: ModelConfig, train: TrainConfig, preset: str, **extra) -> str:
    """The `config.json` written beside every weights file."""
    doc = {"format": "litenet-config/1", "preset": preset, "model": dataclasses.asdict(model),
           "train": dataclasses.asdict(train), **extra}
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def configs_from_json(text: str, source: str = "config.json") -> tuple[ModelConfig, TrainConfig, dict]:
    """Parse a `config.json`; returns the two configs and the whole document."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LiteNetError(f"{source}: not valid JSON ({exc.msg}); re-run training or restore the file") from None
    if not isinstance(doc, dict) or doc.get("format") != "litenet-config/1":
        raise LiteNetError(f"{source}: not a LiteNet config (expected format litenet-config/1)")
    model = config_from_dict(ModelConfig, doc.get("model", {}), source)
    train = config_from_dict(TrainConfig, doc.get("train", {}), source)
    return model, train, doc


# ---------------------------------------------------------------------------------------------
# Parameter layout: one flat buffer, named views. One buffer lets the CUDA backend update and
# take the norm of every parameter in a single launch, and makes the weights file a simple map.


@dataclass(frozen=True)
class ParamSpec:
    name: str
    shape: tuple[int, ...]
    offset: int
    fan_in: int  # for the initialisation bound; 0 for LayerNorm's γ and β
    kind: str  # "weight", "bias", "gamma" or "beta"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@functools.lru_cache(maxsize=64)
def param_layout(model: ModelConfig) -> tuple[ParamSpec, ...]:
    """Every parameter in buffer order. Weights are stored (in, out): the forward is x @ W.

    Cached: the layout is read several times per training step.
    """
    specs: list[ParamSpec] = []

    def add(name, shape, fan_in, kind):
        offset = specs[-1].offset + specs[-1].size if specs else 0
        specs.append(ParamSpec(name, tuple(shape), offset, fan_in, kind))

    d, h = model.width, model.hidden
    add("embed.weight", (model.embed_inputs, d), model.embed_inputs, "weight")
    for i in range(model.blocks):
        add(f"blocks.{i}.fc1.weight", (d, h), d, "weight")
        add(f"blocks.{i}.fc1.bias", (h,), d, "bias")
        add(f"blocks.{i}.fc2.weight", (h, d), h, "weight")
        add(f"blocks.{i}.fc2.bias", (d,), h, "bias")
        add(f"blocks.{i}.ln.gamma", (d,), 0, "gamma")
        add(f"blocks.{i}.ln.beta", (d,), 0, "beta")
    add("head.weight", (d, model.classes), d, "weight")
    add("head.bias", (model.classes,), d, "bias")
    return tuple(specs)


def param_count(model: ModelConfig) -> int:
    last = param_layout(model)[-1]
    return last.offset + last.size


def param_views(flat, model: ModelConfig) -> dict[str, Any]:
    """Named views into a flat parameter (or gradient) buffer; works for NumPy and CuPy arrays."""
    return {p.name: flat[p.offset:p.offset + p.size].reshape(p.shape) for p in param_layout(model)}


def init_params(model: ModelConfig, seed: int, dtype=np.float32) -> np.ndarray:
    """Seeded initialisation shared by every backend (SPEC.md).

    Weights and biases: kaiming-uniform with a = √5, i.e. U(±1/√fan_in) (the gain √(2/(1+a²)) =
    √(1/3) times √(3/fan_in)); γ = 1, β = 0. The draws are made in float64 in layout order from one
    PCG64 stream, so a float32 and a float64 run start from the same numbers.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    flat = np.empty(param_count(model), dtype=np.float64)
    views = param_views(flat, model)
    for p in param_layout(model):
        if p.kind == "gamma":
            views[p.name][...] = 1.0
        elif p.kind == "beta":
            views[p.name][...] = 0.0
        elif p.name == "embed.weight" and model.embed_init == "normal":
            views[p.name][...] = rng.standard_normal(p.shape)
        else:
            bound = 1.0 / np.sqrt(p.fan_in)
            views[p.name][...] = rng.uniform(-bound, bound, size=p.shape)
    return flat.astype(dtype)
