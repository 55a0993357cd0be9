"""The networks' settings: frozen configs per family, TOML presets, the flat parameter layout and seeded initialisation.

Every backend (NumPy, CUDA), the exporter and the runtime read the architecture from here and from
its op list (litenet.graph), so a parameter has one name, one shape and one place in the flat
buffer everywhere. Every setting is checked when a config is made: a value outside its range is
refused in one line that names the field and the range (UsageError).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from litenet import graph, layers as layer_list
from litenet.errors import LiteNetError, UsageError
from litenet.layers import EMBED_MODES, PATCHES, Layer
from litenet.limits import (MAX_BATCH, MAX_BLOCKS, MAX_CLASSES, MAX_EPOCHS, MAX_HIDDEN, MAX_LAYERS, MAX_LN_EPS,
                            MAX_PARAMETERS, MAX_STEPS, MAX_WIDTH)
from litenet.resources import models_dir

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

INIT_MODES = ("kaiming-uniform", "normal")
LOSSES = ("margin", "cross-entropy")
SCHEDULES = ("constant", "cosine")
OPTIMIZERS = ("sgd", "adamw")
DECAY = ("all", "weights")
PRECISIONS = ("fp32", "tf32", "bf16")
ACTIVATION_MODES = ("keep", "recompute")
AUGMENTS = ("crop", "flip", "cutout", "cutmix")  # combinable: "crop+flip", "crop+flip+cutmix"; "none" for none


@dataclass(frozen=True)
class ModelConfig:
    """The MLP family (litenet-seed, litenet-base): embedding → `blocks` dual-path residual blocks → linear head."""

    family: ClassVar[str] = "mlp"
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
        _check_shared_model_settings(self)
        _check_range("hidden", self.hidden, low=1, high=MAX_HIDDEN)
        _check_parameter_count(self)

    @property
    def embed_inputs(self) -> int:
        """Rows of the embedding matrix: 1024 pixels (colours summed) or all 3072 values."""
        return 1024 if self.embed == "channel-sum" else 3072


@dataclass(frozen=True)
class MixerConfig:
    """The token-mixing family (litenet-mixer): P×P patches → linear embedding → `blocks` of
    [LayerNorm → MLP across the patches] and [LayerNorm → MLP across the channels], each with a
    residual → LayerNorm → mean over the patches → linear head (litenet.graph.mixer_layers)."""

    family: ClassVar[str] = "mixer"
    patch: int = 4  # P: 32/P patches a side, T = (32/P)² in all
    input_shift: float = 0.5  # centre the [0, 1] pixels, as litenet-base does ...
    input_scale: float = 1.0  # ... then multiply them: 4 ≈ 1/std of CIFAR-10's pixels (a per-image normalisation)
    width: int = 128  # d, the channels of every patch's vector
    token_hidden: int = 64  # the MLP across the patches: T → token_hidden → T
    channel_hidden: int = 512  # the MLP across the channels: d → channel_hidden → d
    blocks: int = 8
    classes: int = 10
    ln_eps: float = 1e-5

    def __post_init__(self):
        if self.patch not in PATCHES:
            raise UsageError(f"patch must be one of {', '.join(map(str, PATCHES))} (a side that tiles 32); "
                             f"got {self.patch!r}")
        _check_shared_model_settings(self)
        _check_range("input_scale", self.input_scale, low=0.0, low_open=True, high=100.0)
        _check_range("token_hidden", self.token_hidden, low=1, high=MAX_HIDDEN)
        _check_range("channel_hidden", self.channel_hidden, low=1, high=MAX_HIDDEN)
        _check_parameter_count(self)

    @property
    def tokens(self) -> int:
        """T, the number of patches."""
        return (32 // self.patch) ** 2


@dataclass(frozen=True)
class LayersConfig:
    """A network given as its list of layers (litenet.layers; a preset's [[model.layers]] tables, or what
    LiteNet Studio saves): any list that `litenet.layers.check` accepts trains, exports and runs."""

    family: ClassVar[str] = "layers"
    layers: tuple[Layer, ...] = ()
    classes: int = 10
    ln_eps: float = 1e-5

    def __post_init__(self):
        _check_range("classes", self.classes, low=2, high=MAX_CLASSES)
        _check_range("ln_eps", self.ln_eps, low=0.0, low_open=True, high=MAX_LN_EPS)
        if len(self.layers) > MAX_LAYERS:
            raise UsageError(f"a layer list holds at most {MAX_LAYERS} layers; got {len(self.layers)}")
        graph.layer_ops(self.layers, self.classes, self.ln_eps)  # a list that cannot be built is refused here
        _check_parameter_count(self)

    @property
    def blocks(self) -> int:
        """The residual blocks in the list (recorded with a run, as the families' `blocks`)."""
        return sum(lay.kind in graph.BLOCKS for lay in self.layers)

    @property
    def input_shift(self) -> float:
        """The input layer's shift: the grey that the network reads as zero (saliency measures from it)."""
        return self.layers[0]["input_shift"]


FAMILIES = {"mlp": ModelConfig, "mixer": MixerConfig, "layers": LayersConfig}
AnyModel = ModelConfig | MixerConfig | LayersConfig


def _check_shared_model_settings(model) -> None:
    # Upper bounds first (litenet/limits.py): the op list and the parameter layout are built from these.
    _check_range("width", model.width, low=1, high=MAX_WIDTH)
    _check_range("blocks", model.blocks, low=1, high=MAX_BLOCKS)
    _check_range("classes", model.classes, low=2, high=MAX_CLASSES)
    _check_range("ln_eps", model.ln_eps, low=0.0, low_open=True, high=MAX_LN_EPS)
    _check_range("input_shift", model.input_shift, low=-1.0, high=1.0)


def _check_parameter_count(model) -> None:
    """Refuse a network too large to hold, from its layout alone (nothing is allocated)."""
    count = param_count(model)
    if count > MAX_PARAMETERS:
        raise UsageError(f"this network would have {count:,} parameters ({4 * count / 2**30:.1f} GiB in float32); "
                         f"the limit is {MAX_PARAMETERS:,}: lower width, hidden, blocks or classes")


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation recipe (docs/spec.md's seed recipe by default)."""

    epochs: int = 15
    batch_size: int = 64
    lr_base: float = 0.048  # the learning rate at batch 256; lr = lr_base × batch / 256
    optimizer: str = "sgd"  # "sgd" (with momentum) or "adamw" (decoupled weight decay, bias-corrected moments)
    momentum: float = 0.9  # SGD only
    beta1: float = 0.9  # AdamW only: the first moment's decay
    beta2: float = 0.999  # AdamW only: the second moment's decay
    adam_eps: float = 1e-8  # AdamW only: added to √v̂
    weight_decay: float = 1e-4  # SGD: added to the gradient; AdamW: w ← w − lr·wd·w, apart from the gradient
    decay: str = "all"  # which tensors decay: "all", or "weights" (not biases nor LayerNorm's γ, β)
    warmup_steps: int = 100  # linear warm-up from lr/warmup_steps to lr
    schedule: str = "constant"  # after warm-up: "constant" or "cosine" (to zero at the last step), per step
    clip_threshold: float = 10.0  # the seed's rule: when ‖g‖ > clip_threshold ... (inf: never)
    clip_norm: float = 1.0  # ... rescale g to this norm
    loss: str = "margin"
    margin: float = 0.3
    label_smoothing: float = 0.0  # cross-entropy only: the target is (1 − ε) onehot + ε / classes
    seed: int = 0  # initialisation, the shuffling and the augmentation of every epoch
    precision: str = "fp32"  # the CUDA backend's matrix products: "fp32", or "tf32" / "bf16" on tensor cores
    #                          (sm_80+; fp32 accumulation and weights); the NumPy backend computes in its dtype
    activations: str = "keep"  # the Mixer's CUDA backend: "keep" every block's LayerNorm outputs and GELU
    #                            products for the backward, or "recompute" them block by block in the
    #                            backward from the kept residual stream: ~⅓ of the arena (litenet-mixer)
    #                            for ~15 % more products a step, the same numbers bit for bit (the forward
    #                            kernels are deterministic). The MLP's CUDA and the NumPy backend refuse it.
    augment: str = "none"  # "flip" (mirror left-right with probability ½), "crop" (a random 32×32
    #                        crop of the image reflect-padded by crop_padding), "cutout" (a cutout_size
    #                        square at a random centre, after crop and flip, filled with the mean grey),
    #                        "cutmix" (a box of another image of the batch pasted in, after the others;
    #                        the target mixed by the box's area: Yun et al. 2019), any +-joined choice of
    #                        them ("crop+flip"), or "none"
    crop_padding: int = 4
    cutout_size: int = 8   # the side of cutout's square, in pixels (its centre may lie near an edge)
    cutmix_prob: float = 1.0  # the chance that an image gets a box of another (its area uniform, Beta(1, 1))

    def __post_init__(self):
        _check_choice("loss", self.loss, LOSSES)
        _check_choice("schedule", self.schedule, SCHEDULES)
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("decay", self.decay, DECAY)
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("activations", self.activations, ACTIVATION_MODES)
        augment_parts(self.augment)
        _check_range("epochs", self.epochs, low=1, high=MAX_EPOCHS)
        _check_range("batch_size", self.batch_size, low=1, high=MAX_BATCH)
        _check_range("lr_base", self.lr_base, low=0.0, low_open=True)
        for name in ("momentum", "beta1", "beta2", "label_smoothing"):
            _check_range(name, getattr(self, name), low=0.0, high=1.0, high_open=True)
        _check_range("adam_eps", self.adam_eps, low=0.0, low_open=True)
        _check_range("weight_decay", self.weight_decay, low=0.0)
        _check_range("warmup_steps", self.warmup_steps, low=0, high=MAX_STEPS)
        _check_range("clip_threshold", self.clip_threshold, low=0.0, low_open=True, finite=False)
        _check_range("clip_norm", self.clip_norm, low=0.0, low_open=True)
        _check_range("margin", self.margin, low=0.0)
        _check_range("seed", self.seed, low=0)
        _check_range("crop_padding", self.crop_padding, low=0, high=16)
        _check_range("cutout_size", self.cutout_size, low=1, high=32)
        _check_range("cutmix_prob", self.cutmix_prob, low=0.0, high=1.0)
        if "cutmix" in self.augmentations and self.loss != "cross-entropy":
            raise UsageError(f"augment cutmix mixes the targets, which the cross-entropy loss takes; loss is {self.loss!r}")
        if self.label_smoothing and self.loss != "cross-entropy":
            raise UsageError(f"label_smoothing applies to the cross-entropy loss; loss is {self.loss!r}")

    @property
    def lr(self) -> float:
        """The peak learning rate after the linear scaling rule."""
        return self.lr_base * self.batch_size / 256

    @property
    def augmentations(self) -> tuple[str, ...]:
        """The augmentations switched on, e.g. ("crop", "flip")."""
        return augment_parts(self.augment)


def augment_parts(augment: str) -> tuple[str, ...]:
    """"crop+flip" → ("crop", "flip"); "none" → (); refuses anything else in one line."""
    parts = () if augment == "none" else tuple(augment.split("+"))
    if any(p not in AUGMENTS for p in parts) or len(set(parts)) != len(parts):
        raise UsageError(f"augment must be none or a +-joined choice of {', '.join(AUGMENTS)} "
                         f"(e.g. crop+flip); got {augment!r}")
    return parts


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_range(name: str, value, low=None, high=None, low_open: bool = False, high_open: bool = False,
                 finite: bool = True) -> None:
    """Refuse a setting outside [low, high] (open ends where asked) in one line naming the range."""
    bad = (low is not None and (value < low or (low_open and value == low))) or \
          (high is not None and (value > high or (high_open and value == high))) or \
          (finite and isinstance(value, float) and not math.isfinite(value)) or value != value
    if bad:
        lo = "" if low is None else f"{'>' if low_open else '≥'} {low}"
        hi = "" if high is None else f"{'<' if high_open else '≤'} {high}"
        raise UsageError(f"{name} must be {' and '.join(x for x in (lo, hi) if x)}; got {value!r}")


# ---------------------------------------------------------------------------------------------
# Presets


@dataclass(frozen=True)
class Preset:
    """A named pair of model and training settings, as read from `models/<name>.toml`."""

    name: str
    model: AnyModel
    train: TrainConfig
    description: str = ""


def preset_names() -> list[str]:
    return sorted(p.stem for p in models_dir().glob("*.toml"))


def load_preset(name_or_path: str) -> Preset:
    """Read a preset by name (`models/<name>.toml`) or from a TOML file path. A preset that names a
    `base` preset starts from that one's [model] and [train] settings and changes those it lists."""
    path, doc = _preset_document(name_or_path)
    return Preset(
        name=doc.get("name", path.stem),
        description=doc.get("description", ""),
        model=model_from_dict(doc.get("model", {}), source=str(path)),
        train=config_from_dict(TrainConfig, doc.get("train", {}), source=str(path)),
    )


def preset_to_toml(name: str, description: str, model: AnyModel, train: TrainConfig) -> str:
    """A preset file that load_preset reads back as the same model and train configs (LiteNet Studio saves
    networks with it): [model] with a layer list as [[model.layers]] tables, and [train]."""
    values = model_to_dict(model)
    listed = values.pop("layers", [])
    lines = [f"name = {_toml_value(name)}", f"description = {_toml_value(description)}", "", "[model]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    for table in listed:
        lines += ["", "[[model.layers]]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
    lines += ["", "[train]", *(f"{k} = {_toml_value(v)}" for k, v in dataclasses.asdict(train).items())]
    return "\n".join(lines) + "\n"


def _toml_value(value) -> str:
    """A TOML scalar: JSON's strings are TOML's basic strings; floats keep every digit (repr), inf as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf" if value < 0 else "nan")
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


PRESET_KEYS = frozenset({"name", "description", "base", "model", "train"})  # a preset file's top level


def _preset_document(name_or_path: str, derived: tuple[Path, ...] = ()) -> tuple[Path, dict[str, Any]]:
    """The preset's TOML as a dict, its base's tables merged under its own."""
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
    except (OSError, UnicodeDecodeError) as exc:
        raise LiteNetError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    unknown = sorted(set(doc) - PRESET_KEYS)
    if unknown:  # a misspelt table ([trian]) would otherwise leave every setting in it at its default
        raise LiteNetError(f"{path}: unknown preset key or table {', '.join(repr(k) for k in unknown)}; "
                           f"a preset holds only {', '.join(sorted(PRESET_KEYS))}")
    for table in ("model", "train"):
        if not isinstance(doc.get(table, {}), dict):
            raise LiteNetError(f"{path}: {table} must be a table ([{table}]), got {type(doc[table]).__name__}")
    for key in ("name", "description", "base"):
        if not isinstance(doc.get(key, ""), str):
            raise LiteNetError(f"{path}: {key} must be a string, got {doc[key]!r}")
    base = doc.pop("base", None)
    if base is None:
        return path, doc
    chain = (*derived, path.resolve())
    if chain.count(path.resolve()) > 1:
        raise LiteNetError(f"{chain[0]}: base presets form a loop ({' → '.join(p.stem for p in chain)})")
    _, inherited = _preset_document(base, chain)
    for table in ("model", "train"):
        doc[table] = {**inherited.get(table, {}), **doc.get(table, {})}
    return path, doc


def model_to_dict(model: AnyModel) -> dict[str, Any]:
    """A model config as JSON-ready values; the family is named for every family but the MLP, so
    an MLP's description reads as it always has (config.json, scales and plan files)."""
    values = dataclasses.asdict(model)
    if model.family == "layers":
        values["layers"] = layer_list.to_dicts(model.layers)
    return values if model.family == "mlp" else {"family": model.family, **values}


def model_from_dict(values: dict[str, Any], source: str = "settings") -> AnyModel:
    """The inverse of model_to_dict (also a preset's [model] table): `family` picks the config class."""
    values = dict(values)
    family = values.pop("family", "mlp")
    if family not in FAMILIES:
        raise LiteNetError(f"{source}: family must be one of {', '.join(FAMILIES)}; got {family!r}")
    if family != "layers":
        return config_from_dict(FAMILIES[family], values, source)
    if "layers" not in values:
        raise LiteNetError(f"{source}: a model of the layers family needs its list: [[model.layers]] tables")
    listed = layer_list.from_dicts(values.pop("layers"), source)
    unknown = sorted(set(values) - {f.name for f in fields(LayersConfig)})
    if unknown:
        raise LiteNetError(f"{source}: unknown LayersConfig setting(s) {', '.join(unknown)}")
    defaults = LayersConfig.__dataclass_fields__
    checked = {k: _coerce(k, v, type(defaults[k].default), source) for k, v in values.items()}
    try:
        return LayersConfig(layers=listed, **checked)
    except layer_list.LayerError as exc:
        raise layer_list.LayerError(f"{source}: {exc}", exc.position) from None
    except UsageError as exc:
        raise LiteNetError(f"{source}: {exc}") from None


def model_setting_names() -> list[str]:
    """Every model setting of every family that a command-line flag can set (a layer list cannot)."""
    return list(dict.fromkeys(f.name for cls in FAMILIES.values() for f in fields(cls) if f.name != "layers"))


def config_from_dict(cls, values: dict[str, Any], source: str = "settings"):
    """Build a config dataclass, refusing unknown keys and values of the wrong type."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise LiteNetError(f"{source}: unknown {cls.__name__} setting(s) {', '.join(unknown)}")
    checked = {k: _coerce(k, v, type(getattr(cls(), k)), source) for k, v in values.items()}
    try:
        return cls(**checked)
    except UsageError as exc:  # a value out of range in a file: the file is what needs fixing
        raise LiteNetError(f"{source}: {exc}") from None


def override(config, values: dict[str, Any], source: str = "command line"):
    """Return `config` with the given fields replaced (only fields of this config are taken)."""
    mine = {k: v for k, v in values.items() if k in {f.name for f in fields(config)}}
    return dataclasses.replace(config, **{k: _coerce(k, v, type(getattr(config, k)), source) for k, v in mine.items()})


def override_preset(preset: Preset, values: dict[str, Any], source: str = "command line") -> tuple[AnyModel, TrainConfig]:
    """The preset's model and train configs with `values` replacing their fields; a model setting
    that only another family has (--patch on an MLP preset) is refused, not ignored."""
    own = {f.name for f in fields(preset.model)} | {f.name for f in fields(preset.train)}
    foreign = sorted(k for k in values if k not in own and k in model_setting_names())
    if foreign:
        raise UsageError(f"{', '.join(foreign)} is not a setting of the {preset.model.family} family "
                         f"(preset {preset.name})")
    model, train = override(preset.model, values, source), override(preset.train, values, source)
    unused = [f"--{k.replace('_', '-')} ({why})" for k in values if (why := inapplicable(train, k))]
    if unused:
        raise UsageError(f"{'; '.join(unused)}: the setting would be ignored; drop it or change what it depends on")
    return model, train


# A training setting that only some recipes read: (the setting it depends on, the values that read it).
APPLIES_WHEN = {
    "momentum": ("optimizer", ("sgd",)), "beta1": ("optimizer", ("adamw",)), "beta2": ("optimizer", ("adamw",)),
    "adam_eps": ("optimizer", ("adamw",)), "margin": ("loss", ("margin",)),
    "label_smoothing": ("loss", ("cross-entropy",)),
}
AUGMENT_SETTINGS = {"crop_padding": "crop", "cutout_size": "cutout", "cutmix_prob": "cutmix"}


def inapplicable(train: TrainConfig, name: str) -> str | None:
    """Why setting `name` does nothing under `train` (the optimizer, loss or augmentation that reads it is
    not chosen), or None when it applies."""
    if name in APPLIES_WHEN:
        on, values = APPLIES_WHEN[name]
        if getattr(train, on) not in values:
            return f"{on} {values[0]!r} reads it; {on} is {getattr(train, on)!r}"
    if name in AUGMENT_SETTINGS and AUGMENT_SETTINGS[name] not in train.augmentations:
        return f"augment {AUGMENT_SETTINGS[name]!r} reads it; augment is {train.augment!r}"
    return None


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


def configs_to_json(model: AnyModel, train: TrainConfig, preset: str, **extra) -> str:
    """The `config.json` written beside every weights file."""
    doc = {"format": "litenet-config/1", "preset": preset, "model": model_to_dict(model),
           "train": dataclasses.asdict(train), **extra}
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def configs_from_json(text: str, source: str = "config.json") -> tuple[AnyModel, TrainConfig, dict]:
    """Parse a `config.json`; returns the two configs and the whole document."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LiteNetError(f"{source}: not valid JSON ({exc.msg}); re-run training or restore the file") from None
    except RecursionError:
        raise LiteNetError(f"{source}: nested too deeply to be a LiteNet config; restore the file") from None
    if not isinstance(doc, dict) or doc.get("format") != "litenet-config/1":
        raise LiteNetError(f"{source}: not a LiteNet config (expected format litenet-config/1)")
    for table in ("model", "train"):
        if not isinstance(doc.get(table, {}), dict):
            raise LiteNetError(f'{source}: "{table}" must be an object of settings, got {type(doc[table]).__name__}; '
                               "re-run training or restore the file")
    model = model_from_dict(doc.get("model", {}), source)
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
def param_layout(model: AnyModel) -> tuple[ParamSpec, ...]:
    """Every parameter in buffer order: the op list's parameters (litenet.graph), op by op.
    Weights are stored (in, out): the forward is x @ W.

    Cached: the layout is read several times per training step.
    """
    specs: list[ParamSpec] = []
    for op in graph.ops_of(model):
        for p in op.params:
            offset = specs[-1].offset + specs[-1].size if specs else 0
            specs.append(ParamSpec(p.name, p.shape, offset, p.fan_in, p.kind))
    return tuple(specs)


def param_count(model: AnyModel) -> int:
    last = param_layout(model)[-1]
    return last.offset + last.size


def param_views(flat, model: AnyModel) -> dict[str, Any]:
    """Named views into a flat parameter (or gradient) buffer; works for NumPy and CuPy arrays."""
    return {p.name: flat[p.offset:p.offset + p.size].reshape(p.shape) for p in param_layout(model)}


def init_params(model: AnyModel, seed: int, dtype=np.float32) -> np.ndarray:
    """Seeded initialisation shared by every backend (docs/spec.md).

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
        elif p.name == "embed.weight" and getattr(model, "embed_init", None) == "normal":
            views[p.name][...] = rng.standard_normal(p.shape)
        else:
            bound = 1.0 / np.sqrt(p.fan_in)
            views[p.name][...] = rng.uniform(-bound, bound, size=p.shape)
    return flat.astype(dtype)
