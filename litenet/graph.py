"""Each architecture as one ordered list of ops: the single description of the computation.

A network is composed as a list of layers (litenet.layers: pixel rows or patches, an embedding,
MLP or Mixer blocks, LayerNorm, the mean over the patches, the head); `layer_ops` lowers it to the
op list. The MLP and Mixer families are two such lists (mlp_layers, mixer_layers); a preset of the
"layers" family gives its list itself.

Every path that runs a network walks this list — the NumPy training reference (forward and
backward), the ONNX builder (fp32 and QDQ), calibration and GPTQ, the int8 plan, the runtime's
NumPy twins and `litenet trace` — and plugs in only the step that differs (an fp32, QDQ or int8
product). The parameter layout (litenet.model.param_layout) is read off the same list: a
parameter is the op's that owns it, in op order.

An op names its output tensor (its own name) and its input tensors (other ops' names, or
"images"); its parameters are `<op name>.weight`, `.bias`, `.gamma`, `.beta`. No NumPy here:
the ops' maths is litenet.ops.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from litenet.layers import Layer, LayerError, check, first_problem, label, layer
from litenet.ops import IMAGE_SIDE

# What each kind computes (the functions are litenet.ops'; shapes per image):
KINDS = {
    "pixel_rows": "images → the rows an MLP embedding multiplies: colour sums (1024) or values (3072), shifted",
    "patches": "images → (T, P·P·3) non-overlapping P×P patches, shifted and scaled",
    "linear": "x W (+ b) over the last axis (the channels)",
    "token_linear": "Wᵀ x + b over the first axis (the patches), the same for every channel",
    "gelu": "½ u (1 + tanh(c (u + 0.044715 u³)))",
    "residual": "x + branch: the identity path joins the branch",
    "layernorm": "γ (s − μ) / √(σ² + eps) + β over the last axis",
    "mean_tokens": "the mean over the patches",
}
PRODUCTS = ("linear", "token_linear")  # the ops with a weight matrix: what int8 quantizes
IMAGES = "images"


@dataclass(frozen=True)
class Param:
    """A parameter tensor an op owns."""

    name: str
    shape: tuple[int, ...]
    kind: str  # "weight", "bias", "gamma" or "beta"
    fan_in: int  # for the initialisation bound 1/√fan_in; 0 for LayerNorm's γ and β


@dataclass(frozen=True)
class Op:
    """One step of a network: `kind` (a key of KINDS) applied to `inputs`, giving the tensor `name`.

    `shape` is the output of one image: (n,) for a vector, (T, n) for the Mixer's patch tensors,
    which the NumPy reference stores tokens-major as (T, B, n) (litenet.ops says why).
    """

    kind: str
    name: str
    inputs: tuple[str, ...]
    shape: tuple[int, ...]
    params: tuple[Param, ...] = ()
    attrs: dict = field(default_factory=dict, compare=False)

    def param(self, kind: str) -> str | None:
        """The name of this op's parameter of `kind`, or None if it has none."""
        return next((p.name for p in self.params if p.kind == kind), None)

    @property
    def tokens(self) -> bool:
        """Whether the output is a (T, n) patch tensor (batch on axis 1 in the reference)."""
        return len(self.shape) == 2


def _product(kind: str, name: str, x: str, n_in: int, n_out: int, shape: tuple[int, ...], bias: bool = True) -> Op:
    params = (Param(f"{name}.weight", (n_in, n_out), "weight", n_in),)
    if bias:
        params += (Param(f"{name}.bias", (n_out,), "bias", n_in),)
    return Op(kind, name, (x,), shape, params)


def _layernorm(name: str, x: str, width: int, eps: float, shape: tuple[int, ...]) -> Op:
    return Op("layernorm", name, (x,), shape, (Param(f"{name}.gamma", (width,), "gamma", 0),
                                               Param(f"{name}.beta", (width,), "beta", 0)), {"eps": eps})


def mlp_layers(model) -> tuple[Layer, ...]:
    """litenet-seed / litenet-base as a layer list: pixel rows → embedding (no bias) → `blocks` residual MLP
    blocks [fc1 → GELU → fc2, + identity, LayerNorm] → head."""
    return (layer("pixels", "embed.rows", embed=model.embed, input_shift=model.input_shift),
            layer("embed", width=model.width, bias=False),
            *(layer("mlp_block", hidden=model.hidden) for _ in range(model.blocks)),
            layer("head"))


def mixer_layers(model) -> tuple[Layer, ...]:
    """LiteNet-Mixer as a layer list: patches → linear embedding → `blocks` Mixer blocks [LayerNorm → MLP across
    the patches, + identity; LayerNorm → MLP across the channels, + identity] → LayerNorm → mean over the
    patches → head."""
    return (layer("patches", patch=model.patch, input_shift=model.input_shift, input_scale=model.input_scale),
            layer("embed", width=model.width, bias=True),
            *(layer("mixer_block", token_hidden=model.token_hidden, channel_hidden=model.channel_hidden)
              for _ in range(model.blocks)),
            layer("layernorm", "final_ln"), layer("mean_tokens"), layer("head"))


def mlp_ops(model) -> tuple[Op, ...]:
    """The MLP family's op list (mlp_layers lowered)."""
    return layer_ops(mlp_layers(model), model.classes, model.ln_eps)


def mixer_ops(model) -> tuple[Op, ...]:
    """The Mixer family's op list (mixer_layers lowered)."""
    return layer_ops(mixer_layers(model), model.classes, model.ln_eps)


# family → its layer list (a plain dict: no discovery by name); the "layers" family holds its list itself
ARCHITECTURES = {"mlp": mlp_layers, "mixer": mixer_layers, "layers": lambda model: model.layers}


def layers_of(model) -> tuple[Layer, ...]:
    """The layer list of a model config (any family)."""
    return ARCHITECTURES[model.family](model)


@functools.lru_cache(maxsize=64)
def ops_of(model) -> tuple[Op, ...]:
    """The op list of a model config (any family); cached, since every step reads it."""
    return layer_ops(layers_of(model), model.classes, model.ln_eps)


# ---------------------------------------------------------------------------------------------
# Layers → ops


def _block_ops(lay: Layer, p: str, x: str, given: tuple[int, ...], eps: float) -> list[Op]:
    """A residual block's ops under the prefix `p` (litenet.layers.KINDS says what each block computes)."""
    if lay.kind == "mlp_block":  # works on a vector (d,) or, token by token, on patch tokens (T, d)
        d, h, inner = given[-1], lay["hidden"], (*given[:-1], lay["hidden"])
        return [_product("linear", f"{p}.fc1", x, d, h, inner),
                Op("gelu", f"{p}.gelu", (f"{p}.fc1",), inner),
                _product("linear", f"{p}.fc2", f"{p}.gelu", h, d, given),
                Op("residual", f"{p}.residual", (x, f"{p}.fc2"), given),
                _layernorm(f"{p}.ln", f"{p}.residual", d, eps, given)]
    (T, c), th, ch = given, lay["token_hidden"], lay["channel_hidden"]
    return [_layernorm(f"{p}.token_ln", x, c, eps, (T, c)),
            _product("token_linear", f"{p}.token_fc1", f"{p}.token_ln", T, th, (th, c)),
            Op("gelu", f"{p}.token_gelu", (f"{p}.token_fc1",), (th, c)),
            _product("token_linear", f"{p}.token_fc2", f"{p}.token_gelu", th, T, (T, c)),
            Op("residual", f"{p}.token_residual", (x, f"{p}.token_fc2"), (T, c)),
            _layernorm(f"{p}.channel_ln", f"{p}.token_residual", c, eps, (T, c)),
            _product("linear", f"{p}.channel_fc1", f"{p}.channel_ln", c, ch, (T, ch)),
            Op("gelu", f"{p}.channel_gelu", (f"{p}.channel_fc1",), (T, ch)),
            _product("linear", f"{p}.channel_fc2", f"{p}.channel_gelu", ch, c, (T, c)),
            Op("residual", f"{p}.channel_residual", (f"{p}.token_residual", f"{p}.channel_fc2"), (T, c))]


def _lower(lay: Layer, name: str, x: str, given, shape, classes: int, eps: float) -> list[Op]:
    """One layer's ops, reading tensor `x` of shape `given` and giving `shape` (per image)."""
    kind = lay.kind
    if kind == "pixels":
        return [Op("pixel_rows", name, (x,), shape, attrs={"embed": lay["embed"], "input_shift": lay["input_shift"]})]
    if kind == "patches":
        return [Op("patches", name, (x,), shape, attrs={"patch": lay["patch"], "input_shift": lay["input_shift"],
                                                         "input_scale": lay["input_scale"]})]
    if kind in ("embed", "linear"):
        return [_product("linear", name, x, given[-1], lay["width"], shape, bias=lay["bias"])]
    if kind == "head":
        return [_product("linear", name, x, given[-1], classes, shape)]
    if kind == "layernorm":
        return [_layernorm(name, x, given[-1], eps, shape)]
    if kind in ("gelu", "mean_tokens"):
        return [Op(kind, name, (x,), shape)]
    return _block_ops(lay, name, x, given, eps)


# a layer's op name when it gives none: "{kind}.{n}" (n counting that kind) unless listed here
DEFAULT_NAMES = {"pixels": "pixels", "patches": "patches", "embed": "embed", "mean_tokens": "pool", "head": "head"}
BLOCKS = ("mlp_block", "mixer_block")  # named blocks.{i}, i counting both kinds together


def _default_name(kind: str, n: int) -> str:
    """The op name of the n-th layer of `kind` (n counts both block kinds together) that gives no name."""
    if kind in BLOCKS:
        return f"blocks.{n}"
    base = DEFAULT_NAMES.get(kind)
    if base is None:
        return f"{kind}.{n}"
    return base if n == 0 else f"{base}.{n}"


def layer_spans(layers, classes: int, ln_eps: float) -> list[tuple[Op, ...]]:
    """Each layer's ops, in order; a list that cannot be built is refused in one line naming the layer
    and the shapes (litenet.layers.check), as is an op name two layers would both use."""
    first_problem(layers, classes)
    checked = check(layers, classes)
    spans, owner, counts, x = [], {IMAGES: None}, {}, IMAGES
    for i, (lay, c) in enumerate(zip(layers, checked)):
        group = "blocks" if lay.kind in BLOCKS else lay.kind
        counts[group] = counts.get(group, 0) + 1
        name = lay.name or _default_name(lay.kind, counts[group] - 1)
        span = tuple(_lower(lay, name, x, c.given, c.shape, classes, ln_eps))
        for op in span:
            if op.name in owner:
                taken = "the images" if owner[op.name] is None else label(owner[op.name], layers[owner[op.name]].kind)
                raise LayerError(f"{label(i, lay.kind)}: the name {op.name!r} is already used by {taken}; "
                                 "give the layer another name", i)
            owner[op.name] = i
        spans.append(span)
        x = span[-1].name
    return spans


def layer_ops(layers, classes: int, ln_eps: float) -> tuple[Op, ...]:
    """The op list of a layer list (every backend, exporter and viewer walks it)."""
    return tuple(op for span in layer_spans(layers, classes, ln_eps) for op in span)


# Floating-point operations per output value of the ops without a weight matrix (a multiply-add counts 2):
# what the parameter count leaves out of a network's cost. Rough for GELU (tanh counted as one).
ELEMENTWISE_FLOPS = {"pixel_rows": 1, "patches": 2, "gelu": 8, "residual": 1, "layernorm": 7}


def flops_per_image(ops: tuple[Op, ...]) -> dict[str, int]:
    """op name → its forward's floating-point operations for one image: 2·n_in (+ 1 for the bias) per
    output value of a product (over the channels or over the patches alike), one addition per input
    value for the mean over the patches, ELEMENTWISE_FLOPS per output value otherwise."""
    sizes = {op.name: math.prod(op.shape) for op in ops}
    out = {}
    for op in ops:
        if op.kind in PRODUCTS:
            n_in = next(p.shape[0] for p in op.params if p.kind == "weight")
            out[op.name] = sizes[op.name] * (2 * n_in + (1 if op.param("bias") else 0))
        elif op.kind == "mean_tokens":
            out[op.name] = sizes[op.inputs[0]]
        else:
            out[op.name] = sizes[op.name] * ELEMENTWISE_FLOPS[op.kind]
    return out


def products(model) -> tuple[Op, ...]:
    """The ops with a weight matrix, in graph order: what int8 quantizes (input per tensor, weight per channel)."""
    return tuple(op for op in ops_of(model) if op.kind in PRODUCTS)


def residuals(model) -> tuple[Op, ...]:
    """The residual joins, in graph order: where the training statistics measure the two paths."""
    return tuple(op for op in ops_of(model) if op.kind == "residual")


def consumers(ops: tuple[Op, ...]) -> dict[str, list[Op]]:
    """Tensor name → the ops that read it, in graph order."""
    out: dict[str, list[Op]] = {}
    for op in ops:
        for name in op.inputs:
            out.setdefault(name, []).append(op)
    return out


def patch_grid(patch: int) -> int:
    """Patches along one side of the 32×32 image."""
    return IMAGE_SIDE // patch
