"""The forward pass: an architecture's op list (litenet.graph) walked op by op with litenet.ops' maths.

This is the only forward pass written in Python. Training keeps the whole `Tape` for its backward;
inference, calibration and the int8 plan keep only what is still to be read. What differs between
them is the product step (`Product`): float weights here, the int8 plan's integer arithmetic in
litenet.runtime.int8_plan, a recorder of inputs in calibration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from litenet import ops
from litenet.graph import IMAGES, PRODUCTS, Op

# (op, its input) → its output, for the ops with a weight matrix (graph.PRODUCTS)
Product = Callable[[Op, np.ndarray], np.ndarray]


@dataclass
class Tape:
    """Every tensor of one forward pass by name ("images" is the input as floats), and per op what
    its backward needs beyond its inputs (LayerNorm's n and 1/σ)."""

    ops: tuple[Op, ...]
    values: dict[str, np.ndarray]
    caches: dict[str, object] = field(default_factory=dict)

    @property
    def x(self) -> np.ndarray:
        """The images as floats in [0, 1]."""
        return self.values[IMAGES]

    @property
    def z(self) -> np.ndarray:
        """The logits (B, classes): the last op's output."""
        return self.values[self.ops[-1].name]


def float_product(params: dict[str, np.ndarray]) -> Product:
    """The product step with float weights (and biases) from `params`, by parameter name."""
    def product(op: Op, x: np.ndarray) -> np.ndarray:
        bias = params[op.param("bias")] if op.param("bias") else None
        if op.kind == "linear":
            return ops.linear_forward(x, params[op.param("weight")], bias)
        return ops.token_linear_forward(x, params[op.param("weight")], bias)
    return product


def _layernorm(op, inputs, params, keep):
    return ops.layernorm_forward(inputs[0], params[op.param("gamma")], params[op.param("beta")], op.attrs["eps"])


def _gelu(op, inputs, params, keep):
    return ops.gelu_forward(inputs[0], keep_tanh=True) if keep else (ops.gelu_forward(inputs[0]), None)


# kind → (op, input values, parameters by name, whether a backward follows) → (output, cache for the backward or None)
STEPS = {
    "pixel_rows": lambda op, x, p, keep: (ops.embed_inputs(x[0], op.attrs["embed"], op.attrs["input_shift"]), None),
    "patches": lambda op, x, p, keep: (ops.patchify(x[0], op.attrs["patch"], op.attrs["input_shift"],
                                                    op.attrs["input_scale"]), None),
    "gelu": _gelu,  # keeps t = tanh(…) for the backward
    "residual": lambda op, x, p, keep: (x[0] + x[1], None),
    "layernorm": _layernorm,
    "mean_tokens": lambda op, x, p, keep: (ops.mean_tokens_forward(x[0]), None),
}


def run(graph_ops: tuple[Op, ...], params: dict[str, np.ndarray], images: np.ndarray | None = None, *,
        dtype=np.float32, product: Product | None = None, start: dict[str, np.ndarray] | None = None,
        until: str | None = None, keep: bool = False, on_op=None) -> Tape:
    """Walk `graph_ops` from `images` (uint8 NHWC or floats in [0, 1]) or from the tensors in `start`.

    product  the step for linear / token_linear ops (default: float weights from `params`)
    until    stop once this tensor exists (default: the last op's, the logits)
    keep     keep every tensor and cache (what a backward needs); otherwise each tensor is dropped
             once its last reader has run, so a large batch holds only the live ones
    on_op    called as on_op(op, inputs, output) after each op (litenet trace prints from it)
    Only the ops that `until` depends on run.
    """
    product = product or float_product(params)
    values = dict(start or {})
    if images is not None:
        values[IMAGES] = ops.pixels_to_float(images, dtype)
    target = until or graph_ops[-1].name
    needed = _needed(graph_ops, target, set(values))
    last_read = {name: i for i, op in enumerate(graph_ops) if op.name in needed for name in op.inputs}
    tape = Tape(graph_ops, values)
    for i, op in enumerate(graph_ops):
        if op.name not in needed:
            continue
        inputs = [values[name] for name in op.inputs]
        if op.kind in PRODUCTS:
            out, cache = product(op, inputs[0]), None
        else:
            out, cache = STEPS[op.kind](op, inputs, params, keep)
        values[op.name] = out
        if keep and cache is not None:
            tape.caches[op.name] = cache
        if on_op is not None:
            on_op(op, inputs, out)
        if op.name == target:
            break
        if not keep:
            for name in op.inputs:
                if last_read.get(name) == i and name != target:
                    del values[name]
    return tape


def _needed(graph_ops: tuple[Op, ...], target: str, present: set[str]) -> set[str]:
    """The ops that must run to produce `target` from the tensors already present."""
    producer = {op.name: op for op in graph_ops}
    needed, todo = set(), [target]
    while todo:
        name = todo.pop()
        if name in needed or name in present or name not in producer:
            continue
        needed.add(name)
        todo.extend(producer[name].inputs)
    return needed


def logits(graph_ops: tuple[Op, ...], params: dict[str, np.ndarray], images: np.ndarray,
           batch_size: int = 1000, **options) -> np.ndarray:
    """The logits (N, classes) of many images, run in slices of `batch_size` (float32 out)."""
    out = [run(graph_ops, params, images[i:i + batch_size], **options).z for i in range(0, len(images), batch_size)]
    return np.concatenate(out).astype(np.float32) if out else np.zeros((0, graph_ops[-1].shape[-1]), np.float32)
