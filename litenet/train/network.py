"""The whole network forward and backward: the op list (litenet.graph) walked both ways.

`forward` keeps every activation the backward needs in a Tape (litenet.forward.run); `backward`
walks the op list in reverse, calls each op's backward from litenet.ops, sums the gradients of a
tensor read by several ops, and fills a flat gradient buffer laid out like the parameters
(litenet.model.param_layout).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet import forward as fwd
from litenet import ops
from litenet.forward import Tape
from litenet.graph import IMAGES, Op, ops_of
from litenet.model import AnyModel, param_views


def forward(params: np.ndarray, images: np.ndarray, model: AnyModel) -> Tape:
    """Logits for a batch of images (uint8 or [0, 1] floats), with the activations kept for backward."""
    return fwd.run(ops_of(model), param_views(params, model), images, dtype=params.dtype.type, keep=True)


def loss_and_dlogits(z: np.ndarray, labels: np.ndarray, loss: str, margin: float, smoothing: float = 0.0,
                     mix=None):
    """The batch loss, per-sample losses and ∂L/∂z for the configured loss (mix: CutMix's partner
    labels and shares, ops.cross_entropy_forward; cross-entropy only)."""
    if loss == "margin":
        value, per_sample = ops.margin_loss_forward(z, labels, margin)
        return value, per_sample, ops.margin_loss_backward(z, labels, margin)
    value, per_sample = ops.cross_entropy_forward(z, labels, smoothing, mix)
    return value, per_sample, ops.cross_entropy_backward(z, labels, smoothing, mix)


@dataclass
class ResidualGrads:
    """What meets at a residual join's input on the way back; the monitors read the two paths."""

    ds: np.ndarray  # ∂L/∂(x + branch): arrives at the join's input x through the identity path unchanged
    dx_main: np.ndarray  # the branch's contribution to ∂L/∂x (through the ops that read x besides the join)
    dx: np.ndarray  # their sum, ∂L/∂x


def path_sums(g: ResidualGrads) -> tuple[float, float, float]:
    """(‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩) over the batch: enough to derive any path-share measure."""
    return (float(np.vdot(g.ds, g.ds)), float(np.vdot(g.dx_main, g.dx_main)), float(np.vdot(g.ds, g.dx_main)))


def _products_backward(op: Op, dy, inputs, cache, p, need):
    backward = ops.linear_backward if op.kind == "linear" else ops.token_linear_backward
    dx, dW, db = backward(dy, inputs[0], p[op.param("weight")], want_dx=need[0])
    return [dx], ({"weight": dW, "bias": db} if op.param("bias") else {"weight": dW})


def _layernorm_backward(op: Op, dy, inputs, cache, p, need):
    ds, dgamma, dbeta = ops.layernorm_backward(dy, cache, p[op.param("gamma")])
    return [ds], {"gamma": dgamma, "beta": dbeta}


# kind → (op, ∂output, input values, cache, parameters, which inputs need a gradient)
#      → ([∂input or None per input], {parameter kind: gradient})
BACKWARD = {
    "pixel_rows": lambda op, dy, x, c, p, need: ([ops.embed_inputs_backward(dy, op.attrs["embed"]) if need[0] else None], {}),
    "patches": lambda op, dy, x, c, p, need: (
        [ops.patchify_backward(dy, op.attrs["patch"], op.attrs["input_scale"]) if need[0] else None], {}),
    "linear": _products_backward,
    "token_linear": _products_backward,
    "gelu": lambda op, dy, x, c, p, need: ([ops.gelu_backward(dy, x[0], c)], {}),  # c: the forward's tanh
    "residual": lambda op, dy, x, c, p, need: ([dy, dy], {}),  # the sum passes ∂ on to both paths unchanged
    "layernorm": _layernorm_backward,
    "mean_tokens": lambda op, dy, x, c, p, need: ([ops.mean_tokens_backward(dy, x[0].shape[0])], {}),
}


def _requires_grad(graph_ops: tuple[Op, ...], want_dx: bool) -> dict[str, bool]:
    """Which tensors need ∂L: those with a parameter upstream, and the images' path when ∂x is asked for."""
    requires = {IMAGES: want_dx}
    for op in graph_ops:
        requires[op.name] = bool(op.params) or any(requires[name] for name in op.inputs)
    return requires


def _sum(parts: list[np.ndarray]) -> np.ndarray:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def backward(params: np.ndarray, tape: Tape, dz: np.ndarray, model: AnyModel, want_dx: bool = False,
             grads: np.ndarray | None = None, tensor_grads: dict | None = None, on_op=None):
    """Fill a flat gradient buffer from ∂L/∂z. Returns (grads, ∂L/∂images or None, [ResidualGrads] in
    graph order). `tensor_grads`, when given, receives ∂L of every tensor by name; `on_op` is called
    as on_op(op, ∂output, [∂input], {parameter kind: ∂}, ResidualGrads or None) after each op."""
    p = param_views(params, model)
    grads = np.zeros_like(params) if grads is None else grads
    g = param_views(grads, model)
    requires = _requires_grad(tape.ops, want_dx)
    pending: dict[str, list[np.ndarray]] = {tape.ops[-1].name: [dz]}  # ∂ parts of each tensor, by reader
    identity: dict[str, np.ndarray] = {}  # a residual join's input → the ∂ its identity path brings
    joins: dict[str, ResidualGrads] = {}
    for op in reversed(tape.ops):
        if op.name not in pending:
            continue
        parts = pending.pop(op.name)
        dy = _sum(parts)
        if op.name in identity:  # a residual join's input: the identity path and the branch meet here
            ds = identity.pop(op.name)
            main = [part for part in parts if part is not ds]
            joins[op.name] = ResidualGrads(ds=ds, dx_main=_sum(main) if main else np.zeros_like(ds), dx=dy)
        if tensor_grads is not None:
            tensor_grads[op.name] = dy
        if any(name not in tape.values for name in op.inputs):
            continue  # the forward started after this op (from given tensors): nothing to pass further back
        inputs = [tape.values[name] for name in op.inputs]
        need = [requires[name] for name in op.inputs]
        dins, dparams = BACKWARD[op.kind](op, dy, inputs, tape.caches.get(op.name), p, need)
        for kind, value in dparams.items():
            g[op.param(kind)][...] = value
        if on_op is not None:
            on_op(op, dy, dins, dparams, joins.get(op.name))
        if op.kind == "residual":
            identity[op.inputs[0]] = dins[0]
        for name, d in zip(op.inputs, dins):
            if d is not None:
                pending.setdefault(name, []).append(d)
    dx = _sum(pending[IMAGES]) if want_dx and IMAGES in pending else None
    return grads, dx, [joins[op.inputs[0]] for op in tape.ops if op.kind == "residual"]


def loss_and_grads(params: np.ndarray, images: np.ndarray, labels: np.ndarray, model: AnyModel,
                   loss: str = "margin", margin: float = 0.3, want_dx: bool = False, smoothing: float = 0.0):
    """One forward and backward: (loss, flat grads, ∂L/∂images or None, tape)."""
    tape = forward(params, images, model)
    value, _, dz = loss_and_dlogits(tape.z, labels, loss, margin, smoothing)
    grads, dx, _ = backward(params, tape, dz, model, want_dx=want_dx)
    return value, grads, dx, tape
