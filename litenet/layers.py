"""The layer-list format: a network as an ordered list of layers, each a kind and a few settings.

A layer is what a person composes — in a preset's `[[model.layers]]` tables, or by connecting
blocks in LiteNet Studio: the images' input (pixel rows or patches), a linear embedding, MLP or
Mixer blocks, LayerNorm, the mean over the patches, the classifier head. litenet.graph.layer_ops
turns the list into the op list that every backend, exporter and viewer walks; the MLP and Mixer
families are two such lists (graph.mlp_layers, graph.mixer_layers).

This module checks a list without building anything: `check` infers each layer's output shape
(per image: (n,) a vector, (T, n) patch tokens) and says, for every layer that cannot take what
reaches it, why, in one line that names the layer and the shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from litenet.errors import UsageError
from litenet.limits import MAX_WIDTH
from litenet.ops import IMAGE_SIDE

EMBED_MODES = ("channel-sum", "full")
PATCHES = (1, 2, 4, 8, 16, 32)  # the patch sides that tile a 32×32 image
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")  # op names become parameter and ONNX names


@dataclass(frozen=True)
class Setting:
    """One setting of a layer kind: its default (None: required), type and range."""

    default: Any
    kind: type
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    low_open: bool = False  # the low end itself is outside the range


@dataclass(frozen=True)
class LayerKind:
    """What a layer of this kind computes, what it reads ("images", "tokens", "vector" or "any") and its settings."""

    doc: str
    reads: str
    settings: tuple[tuple[str, Setting], ...] = ()


def _width(doc: str) -> Setting:
    return Setting(None, int, doc, low=1, high=MAX_WIDTH)


_SHIFT = Setting(0.0, float, "subtracted from the [0, 1] pixels", low=-1.0, high=1.0)

# kind → what it is (the Studio's palette shows these in this order)
KINDS: dict[str, LayerKind] = {
    "pixels": LayerKind("the image as one row of values: per-pixel colour sums (1024) or all 3072 values, shifted",
                        "images", (("embed", Setting("full", str, "channel-sum: R+G+B per pixel; full: every value",
                                                     choices=EMBED_MODES)), ("input_shift", _SHIFT))),
    "patches": LayerKind("the image as (32/P)² patch tokens of P·P·3 values, shifted and scaled", "images",
                         (("patch", Setting(4, int, "P, the patch side", choices=PATCHES)), ("input_shift", _SHIFT),
                          ("input_scale", Setting(1.0, float, "multiplies the shifted pixels", low=0.0, high=100.0,
                                                         low_open=True)))),
    "embed": LayerKind("a linear embedding: x W (+ b) to `width` channels", "any",
                       (("width", _width("output channels")), ("bias", Setting(True, bool, "add a bias")))),
    "linear": LayerKind("x W (+ b) over the channels", "any",
                        (("width", _width("output channels")), ("bias", Setting(True, bool, "add a bias")))),
    "gelu": LayerKind("GELU, tanh form, on every value", "any"),
    "layernorm": LayerKind("LayerNorm over the channels, with γ and β", "any"),
    "mlp_block": LayerKind("residual MLP block: fc1 (→ hidden) → GELU → fc2 (→ width), + identity, then LayerNorm",
                           "any", (("hidden", _width("fc1's output width")),)),
    "mixer_block": LayerKind("Mixer block: LayerNorm → MLP across the patches (T → token_hidden → T), + identity; "
                             "LayerNorm → MLP across the channels (→ channel_hidden →), + identity", "tokens",
                             (("token_hidden", _width("the patch MLP's hidden width")),
                              ("channel_hidden", _width("the channel MLP's hidden width")))),
    "mean_tokens": LayerKind("the mean over the patch tokens: (T, d) → (d,)", "tokens"),
    "head": LayerKind("the classifier: a linear map to the classes' logits; the last layer", "vector"),
}
INPUTS = ("pixels", "patches")


class LayerError(UsageError):
    """A layer list that cannot be built; `position` is the 0-based index of the layer at fault (None: the list)."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message)
        self.position = position


@dataclass(frozen=True)
class Layer:
    """One layer: its kind, every setting of that kind (defaults filled in, in the kind's order) and an
    optional name for its op (a block's: the prefix of its ops); "" takes the kind's default name."""

    kind: str
    options: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def __getitem__(self, key: str):
        return dict(self.options)[key]


def label(position: int, kind: str) -> str:
    """How messages name a layer: "layer 3 (mlp_block)", counting from 1 as a person reads the list."""
    return f"layer {position + 1} ({kind})"


def layer(kind: str, name: str = "", position: int = 0, **settings) -> Layer:
    """A checked layer: unknown kinds or settings, missing required ones and values out of range are refused."""
    if kind not in KINDS:
        raise LayerError(f"layer {position + 1}: unknown kind {kind!r}; choose one of {', '.join(KINDS)}", position)
    spec = dict(KINDS[kind].settings)
    where = label(position, kind)
    unknown = sorted(set(settings) - set(spec))
    if unknown:
        takes = ", ".join(spec) or "no settings"
        raise LayerError(f"{where}: unknown setting {', '.join(unknown)}; it takes {takes}", position)
    if name and not NAME.fullmatch(name):
        raise LayerError(f"{where}: name {name!r} must be letters, digits and _ in dot-separated parts", position)
    values = []
    for key, setting in spec.items():
        value = settings.get(key, setting.default)
        if value is None:
            raise LayerError(f"{where}: needs {key} ({setting.doc})", position)
        values.append((key, _checked(where, key, value, setting, position)))
    return Layer(kind, tuple(values), name)


def _checked(where: str, key: str, value, setting: Setting, position: int):
    """The value as the setting's type, or a LayerError saying what is wrong with it."""
    if setting.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, setting.kind) or (setting.kind is int and isinstance(value, bool)):
        raise LayerError(f"{where}: {key} must be {setting.kind.__name__}, got {value!r}", position)
    if setting.choices is not None and value not in setting.choices:
        raise LayerError(f"{where}: {key} must be one of {', '.join(map(str, setting.choices))}; got {value!r}",
                         position)
    too_low = setting.low is not None and not (value > setting.low if setting.low_open else value >= setting.low)
    if too_low or (setting.high is not None and not value <= setting.high):
        low = f"({setting.low}" if setting.low_open else f"[{setting.low}"
        raise LayerError(f"{where}: {key} must be in {low}, {setting.high}]; got {value!r}", position)
    return value


def from_dict(item, position: int = 0) -> Layer:
    """One layer from its table ({"kind": ..., settings..., "name": optional}), as TOML or JSON hold it."""
    if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
        raise LayerError(f"layer {position + 1} must be a table with a kind, got {item!r}", position)
    settings = {k: v for k, v in item.items() if k not in ("kind", "name")}
    name = item.get("name", "")
    if not isinstance(name, str):
        raise LayerError(f"{label(position, item['kind'])}: name must be a string, got {name!r}", position)
    return layer(item["kind"], name, position, **settings)


def from_dicts(items, source: str = "layers") -> tuple[Layer, ...]:
    """Layers from a list of tables (from_dict); an error names `source` and the layer."""
    if not isinstance(items, (list, tuple)):
        raise LayerError(f"{source}: layers must be a list of tables, got {type(items).__name__}")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(from_dict(item, i))
        except LayerError as exc:
            raise LayerError(f"{source}: {exc}", i) from None
    return tuple(out)


def to_dicts(layers) -> list[dict[str, Any]]:
    """The inverse of from_dicts: every setting written out, the name only where one was given."""
    return [{"kind": lay.kind, **dict(lay.options), **({"name": lay.name} if lay.name else {})} for lay in layers]


# ---------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class Checked:
    """One layer as `check` sees it: the shape that reaches it, the shape it gives, and what is wrong."""

    given: tuple[int, ...] | None  # None: the images (for an input layer) or unknown after an earlier fault
    shape: tuple[int, ...] | None  # None where the layer is at fault or follows one
    problem: str = ""  # one line naming the layer and the shapes; "" when it fits


def describe_shape(shape: tuple[int, ...]) -> str:
    """(64, 128) → "patch tokens (64, 128)"; (256,) → "a vector (256,)"."""
    return f"patch tokens {shape}" if len(shape) == 2 else f"a vector {shape}"


def output_shape(lay: Layer, given: tuple[int, ...] | None, classes: int) -> tuple[int, ...]:
    """The shape per image that `lay` gives for an input of shape `given` (None: the images)."""
    kind = lay.kind
    if kind == "pixels":
        return (1024,) if lay["embed"] == "channel-sum" else (3072,)
    if kind == "patches":
        return ((IMAGE_SIDE // lay["patch"]) ** 2, lay["patch"] * lay["patch"] * 3)
    if kind in ("embed", "linear"):
        return (*given[:-1], lay["width"])
    if kind == "mean_tokens":
        return given[1:]
    if kind == "head":
        return (classes,)
    return given  # gelu, layernorm and the residual blocks keep the shape


def _problem(position: int, lay: Layer, given: tuple[int, ...] | None, after_head: bool) -> str:
    """Why `lay` cannot take `given`, or ""."""
    where, reads = label(position, lay.kind), KINDS[lay.kind].reads
    if after_head:
        return f"{where}: comes after the head, which gives the logits and must be the last layer"
    if reads == "images" and position > 0:
        return f"{where}: reads the images, so it can only be the first layer; it gets {describe_shape(given)}"
    if reads != "images" and position == 0:
        return f"{where}: the first layer must read the images (one of {', '.join(INPUTS)})"
    if reads == "tokens" and len(given) != 2:
        return f"{where}: needs patch tokens (T, d) but gets {describe_shape(given)}; put it before mean_tokens"
    if reads == "vector" and len(given) != 1:
        return f"{where}: needs a vector (d,) but gets {describe_shape(given)}; add mean_tokens before it"
    return ""


def check(layers, classes: int) -> list[Checked]:
    """Every layer's shapes and problems (all of them, not only the first), then the list's own: it must end
    with the head. A layer after a faulty one is not judged (its input is unknown)."""
    out: list[Checked] = []
    given, after_head = None, False
    for i, lay in enumerate(layers):
        if out and out[-1].shape is None:  # unknown input after an earlier fault
            out.append(Checked(None, None))
            continue
        problem = _problem(i, lay, given, after_head)
        shape = None if problem else output_shape(lay, given, classes)
        out.append(Checked(given, shape, problem))
        given, after_head = shape, after_head or lay.kind == "head"
    if not layers:
        raise LayerError("the layer list is empty; start with pixels or patches and end with head")
    if out[-1].shape is not None and layers[-1].kind != "head":
        last = len(layers) - 1
        out[-1] = Checked(out[-1].given, None, f"{label(last, layers[-1].kind)}: the list ends with "
                                               f"{describe_shape(out[-1].shape)}; end it with head ({classes} classes)")
    return out


def first_problem(layers, classes: int) -> None:
    """Raise the first problem `check` finds as a LayerError (its position set), or return."""
    for i, c in enumerate(check(layers, classes)):
        if c.problem:
            raise LayerError(c.problem, i)
