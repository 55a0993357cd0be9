"""Each architecture as one ordered list of ops: the single description of the computation.

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
from dataclasses import dataclass, field

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


def mlp_ops(model) -> tuple[Op, ...]:
    """litenet-seed / litenet-base: embedding → blocks of [fc1 → GELU → fc2, + identity, LayerNorm] → head."""
    d, h, k = model.width, model.hidden, model.embed_inputs
    ops = [Op("pixel_rows", "embed.rows", (IMAGES,), (k,), attrs={"embed": model.embed, "input_shift": model.input_shift}),
           _product("linear", "embed", "embed.rows", k, d, (d,), bias=False)]
    x = "embed"
    for i in range(model.blocks):
        p = f"blocks.{i}"
        ops += [_product("linear", f"{p}.fc1", x, d, h, (h,)),
                Op("gelu", f"{p}.gelu", (f"{p}.fc1",), (h,)),
                _product("linear", f"{p}.fc2", f"{p}.gelu", h, d, (d,)),
                Op("residual", f"{p}.residual", (x, f"{p}.fc2"), (d,)),
                _layernorm(f"{p}.ln", f"{p}.residual", d, model.ln_eps, (d,))]
        x = f"{p}.ln"
    ops.append(_product("linear", "head", x, d, model.classes, (model.classes,)))
    return tuple(ops)


def mixer_ops(model) -> tuple[Op, ...]:
    """LiteNet-Mixer: patches → linear embedding → blocks of [LayerNorm → MLP across the patches, + identity]
    and [LayerNorm → MLP across the channels, + identity] → LayerNorm → mean over the patches → head."""
    P, c, eps = model.patch, model.width, model.ln_eps
    T, pixels = model.tokens, model.patch * model.patch * 3
    th, ch = model.token_hidden, model.channel_hidden
    ops = [Op("patches", "patches", (IMAGES,), (T, pixels),
              attrs={"patch": P, "input_shift": model.input_shift, "input_scale": model.input_scale}),
           _product("linear", "embed", "patches", pixels, c, (T, c))]
    x = "embed"
    for i in range(model.blocks):
        p = f"blocks.{i}"
        ops += [_layernorm(f"{p}.token_ln", x, c, eps, (T, c)),
                _product("token_linear", f"{p}.token_fc1", f"{p}.token_ln", T, th, (th, c)),
                Op("gelu", f"{p}.token_gelu", (f"{p}.token_fc1",), (th, c)),
                _product("token_linear", f"{p}.token_fc2", f"{p}.token_gelu", th, T, (T, c)),
                Op("residual", f"{p}.token_residual", (x, f"{p}.token_fc2"), (T, c)),
                _layernorm(f"{p}.channel_ln", f"{p}.token_residual", c, eps, (T, c)),
                _product("linear", f"{p}.channel_fc1", f"{p}.channel_ln", c, ch, (T, ch)),
                Op("gelu", f"{p}.channel_gelu", (f"{p}.channel_fc1",), (T, ch)),
                _product("linear", f"{p}.channel_fc2", f"{p}.channel_gelu", ch, c, (T, c)),
                Op("residual", f"{p}.channel_residual", (f"{p}.token_residual", f"{p}.channel_fc2"), (T, c))]
        x = f"{p}.channel_residual"
    ops += [_layernorm("final_ln", x, c, eps, (T, c)),
            Op("mean_tokens", "pool", ("final_ln",), (c,)),
            _product("linear", "head", "pool", c, model.classes, (model.classes,))]
    return tuple(ops)


# family → the function that lists its ops (a plain dict: no discovery by name)
ARCHITECTURES = {"mlp": mlp_ops, "mixer": mixer_ops}


@functools.lru_cache(maxsize=64)
def ops_of(model) -> tuple[Op, ...]:
    """The op list of a model config (any family); cached, since every step reads it."""
    return ARCHITECTURES[model.family](model)


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
