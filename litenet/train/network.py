"""The whole LiteNet forward and backward, composed from the reference operations.

`forward` keeps every activation the backward needs in a `Tape`; `backward` walks it in reverse
and fills a flat gradient buffer laid out like the parameters (litenet.model.param_layout).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from litenet.model import ModelConfig, param_views
from litenet.train import reference as ref


@dataclass
class BlockTape:
    x: np.ndarray  # block input (B, d)
    u: np.ndarray  # fc1 output, before GELU (B, H)
    a: np.ndarray  # GELU(u) (B, H)
    ln_cache: tuple  # (n, rstd) of the residual LayerNorm


@dataclass
class Tape:
    x: np.ndarray  # the images as floats (B, 32, 32, 3)
    s: np.ndarray | None = None  # what the embedding multiplies: colour sums (B, 1024) or values (B, 3072)
    blocks: list[BlockTape] = field(default_factory=list)
    y: np.ndarray | None = None  # last block output, the head's input (B, d)
    z: np.ndarray | None = None  # logits (B, C)


def forward(params: np.ndarray, images: np.ndarray, model: ModelConfig) -> Tape:
    """Logits for a batch of images (uint8 or [0, 1] floats), with the activations kept for backward."""
    p = param_views(params, model)
    x = ref.pixels_to_float(images, params.dtype.type)
    # embed_forward in two steps, so the tape keeps s for the backward
    s = ref.embed_inputs(x, model.embed, model.input_shift)
    tape = Tape(x=x, s=s)
    h = s @ p["embed.weight"]  # (B, d)
    for i in range(model.blocks):
        u = ref.linear_forward(h, p[f"blocks.{i}.fc1.weight"], p[f"blocks.{i}.fc1.bias"])  # main path d→H
        a = ref.gelu_forward(u)
        v = ref.linear_forward(a, p[f"blocks.{i}.fc2.weight"], p[f"blocks.{i}.fc2.bias"])  # H→d
        y, ln_cache = ref.residual_layernorm_forward(  # identity side path joins here
            h, v, p[f"blocks.{i}.ln.gamma"], p[f"blocks.{i}.ln.beta"], model.ln_eps)
        tape.blocks.append(BlockTape(x=h, u=u, a=a, ln_cache=ln_cache))
        h = y
    tape.y = h
    tape.z = ref.linear_forward(h, p["head.weight"], p["head.bias"])
    return tape


def loss_and_dlogits(z: np.ndarray, labels: np.ndarray, loss: str, margin: float):
    """The batch loss, per-sample losses and ∂L/∂z for the configured loss."""
    if loss == "margin":
        value, per_sample = ref.margin_loss_forward(z, labels, margin)
        return value, per_sample, ref.margin_loss_backward(z, labels, margin)
    value, per_sample = ref.cross_entropy_forward(z, labels)
    return value, per_sample, ref.cross_entropy_backward(z, labels)


@dataclass
class BlockGrads:
    """What crosses a block on the way back; the monitors read the two path contributions."""

    ds: np.ndarray  # ∂L/∂(x + v): arrives at the block input through the identity path unchanged
    dx_main: np.ndarray  # the main path's contribution to ∂L/∂x, ∂u W1ᵀ
    dx: np.ndarray  # their sum, ∂L/∂x


def path_sums(g: BlockGrads) -> tuple[float, float, float]:
    """(‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩) over the batch: enough to derive any path-share measure."""
    return (float(np.vdot(g.ds, g.ds)), float(np.vdot(g.dx_main, g.dx_main)), float(np.vdot(g.ds, g.dx_main)))


def backward(params: np.ndarray, tape: Tape, dz: np.ndarray, model: ModelConfig,
             want_dx: bool = False, grads: np.ndarray | None = None):
    """Fill a flat gradient buffer from ∂L/∂z. Returns (grads, ∂L/∂images or None, [BlockGrads])."""
    p = param_views(params, model)
    grads = np.zeros_like(params) if grads is None else grads
    g = param_views(grads, model)
    dh, g["head.weight"][...], g["head.bias"][...] = ref.linear_backward(dz, tape.y, p["head.weight"])
    block_grads = []
    for i in reversed(range(model.blocks)):
        t = tape.blocks[i]
        ds, g[f"blocks.{i}.ln.gamma"][...], g[f"blocks.{i}.ln.beta"][...] = ref.residual_layernorm_backward(
            dh, t.ln_cache, p[f"blocks.{i}.ln.gamma"])
        da, g[f"blocks.{i}.fc2.weight"][...], g[f"blocks.{i}.fc2.bias"][...] = ref.linear_backward(
            ds, t.a, p[f"blocks.{i}.fc2.weight"])
        du = ref.gelu_backward(da, t.u)
        dx_main, g[f"blocks.{i}.fc1.weight"][...], g[f"blocks.{i}.fc1.bias"][...] = ref.linear_backward(
            du, t.x, p[f"blocks.{i}.fc1.weight"])
        dh = ds + dx_main  # identity path + main path
        block_grads.append(BlockGrads(ds=ds, dx_main=dx_main, dx=dh))
    g["embed.weight"][...], dx = ref.embed_backward(
        dh, tape.x, p["embed.weight"], model.embed, model.input_shift, want_dx=want_dx, inputs=tape.s)
    return grads, dx, block_grads[::-1]


def loss_and_grads(params: np.ndarray, images: np.ndarray, labels: np.ndarray, model: ModelConfig,
                   loss: str = "margin", margin: float = 0.3, want_dx: bool = False):
    """One forward and backward: (loss, flat grads, ∂L/∂images or None, tape)."""
    tape = forward(params, images, model)
    value, _, dz = loss_and_dlogits(tape.z, labels, loss, margin)
    grads, dx, _ = backward(params, tape, dz, model, want_dx=want_dx)
    return value, grads, dx, tape
