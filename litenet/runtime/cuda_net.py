"""The CUDA inference backend's model on the host: fp32 weights and the int8 plan packed into the
layouts kernels/infer_core.cuh reads, and the NumPy twin of the fp32 kernels.

Packing (both precisions): every weight matrix (out N, in K) row-major — transposed against the
weights file, so one output channel's inputs are contiguous — with K zero-padded to
Kp = ⌈K/64⌉·64; the int8 plan already stores (N, K) and is padded the same, four int8 to an int32
word (dp4a's operand). `layout` holds, per phase of the forward (0 embed, 1 + 2i fc1 of block i,
2 + 2i its fc2, 2·blocks + 1 the head), six int32: the offsets of its weights, bias, int8
multipliers, input scale, and (fc2 phases) the γ, β of the LayerNorm that closes the block.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.runtime import int8_plan
from litenet.runtime.model_files import MODEL_HINT, ModelFiles

LAYOUT_WIDTH = 6  # IL_WIDTH in infer_core.cuh
NO_TENSOR = -1


def pad64(k: int) -> int:
    return (k + 63) // 64 * 64


@dataclass(frozen=True)
class NetShape:
    """The architecture as the kernels need it."""

    embed: str  # "full" | "channel-sum"
    input_shift: float
    width: int
    hidden: int
    blocks: int
    classes: int
    ln_eps: float

    @property
    def embed_inputs(self) -> int:
        return 3072 if self.embed == "full" else 1024

    @property
    def phases(self) -> int:
        return 2 * self.blocks + 2

    def layers(self) -> list[tuple[str, int, int]]:
        """(name, N out, K in) per phase, in phase order."""
        d, h = self.width, self.hidden
        out = [("embed", d, self.embed_inputs)]
        for i in range(self.blocks):
            out += [(f"blocks.{i}.fc1", h, d), (f"blocks.{i}.fc2", d, h)]
        return out + [("head", self.classes, d)]


@dataclass
class PackedNet:
    """One precision of a model, packed: what goes to the GPU once."""

    shape: NetShape
    precision: str
    words: np.ndarray     # fp32: every tensor (float32); int8: the weights (int32 words)
    floats: np.ndarray    # int8: multipliers, biases, scales, γ, β (float32); fp32: same array as words
    layout: np.ndarray    # (phases, LAYOUT_WIDTH) int32
    classes: tuple[str, ...]

    def scale(self, phase: int) -> float:
        """int8: the input scale of a phase's layer."""
        return float(self.floats[self.layout[phase, 3]])


class _Arena:
    """Tensors appended one after another, each at an offset that is a multiple of 64 elements."""

    def __init__(self, dtype):
        self.parts, self.size, self.dtype = [], 0, dtype

    def add(self, values: np.ndarray) -> int:
        offset = self.size
        flat = np.ascontiguousarray(values, self.dtype).ravel()
        self.parts.append((offset, flat))
        self.size = pad64(offset + flat.size)
        return offset

    def array(self) -> np.ndarray:
        out = np.zeros(max(self.size, 64), self.dtype)
        for offset, flat in self.parts:
            out[offset:offset + flat.size] = flat
        return out


def _padded(w_out_in: np.ndarray) -> np.ndarray:
    n, k = w_out_in.shape
    out = np.zeros((n, pad64(k)), w_out_in.dtype)
    out[:, :k] = w_out_in
    return out


def shape_from_model_json(model: dict) -> NetShape:
    return NetShape(embed=model["embed"], input_shift=float(model.get("input_shift", 0.0)), width=int(model["width"]),
                    hidden=int(model["hidden"]), blocks=int(model["blocks"]), classes=int(model["classes"]),
                    ln_eps=float(model.get("ln_eps", 1e-5)))


def load_fp32(files: ModelFiles) -> tuple[NetShape, dict[str, np.ndarray], tuple[str, ...]]:
    """weights.safetensors + config.json → (shape, float32 tensors by name as in the weights file, classes)."""
    from litenet.weights import load_model

    if files.weights is None or files.config is None:
        raise LiteNetError(f"{files.describe()}: the CUDA backend's fp32 needs weights.safetensors and config.json "
                           f"beside each other; {MODEL_HINT}")
    flat, model, _train, doc = load_model(files.weights.parent)
    from litenet.model import param_views

    tensors = {k: np.asarray(v, np.float32) for k, v in param_views(flat, model).items()}
    shape = shape_from_model_json(doc["model"])
    return shape, tensors, files.classes or tuple(f"class {i}" for i in range(shape.classes))


def pack_fp32(shape: NetShape, t: dict[str, np.ndarray], classes=()) -> PackedNet:
    """Float weights (in, out) → the fp32 kernels' arena and layout."""
    arena = _Arena(np.float32)
    layout = np.full((shape.phases, LAYOUT_WIDTH), NO_TENSOR, np.int32)
    for p, (name, _n, _k) in enumerate(shape.layers()):
        layout[p, 0] = arena.add(_padded(t[f"{name}.weight"].T))
        if f"{name}.bias" in t:
            layout[p, 1] = arena.add(t[f"{name}.bias"])
    for i in range(shape.blocks):
        layout[2 + 2 * i, 4] = arena.add(t[f"blocks.{i}.ln.gamma"])
        layout[2 + 2 * i, 5] = arena.add(t[f"blocks.{i}.ln.beta"])
    words = arena.array()
    return PackedNet(shape, "fp32", words, words, layout, tuple(classes))


def load_int8(files: ModelFiles) -> int8_plan.Plan:
    if files.plan is None:
        raise LiteNetError(f"{files.describe()} has no {int8_plan.PLAN_FILE}; run `litenet export --int8` for it "
                           f"or {MODEL_HINT}")
    plan = int8_plan.load_plan(files.plan)
    files.check_same_weights(plan.metadata, files.plan)
    return plan


def plan_shape(plan: int8_plan.Plan) -> NetShape:
    return shape_from_model_json(json.loads(plan.metadata["model"]))


def pack_int8(plan: int8_plan.Plan) -> PackedNet:
    """The int8 plan → the int8 kernels' word arena (weights), float arena and layout."""
    shape, t = plan_shape(plan), plan.tensors
    words, floats = _Arena(np.int32), _Arena(np.float32)
    layout = np.full((shape.phases, LAYOUT_WIDTH), NO_TENSOR, np.int32)
    for p, (name, n, k) in enumerate(shape.layers()):
        w = np.asarray(t[f"{name}.weight"], np.int8)
        if w.shape != (n, k):
            raise LiteNetError(f"{name}.weight has shape {w.shape}, the plan's model says {(n, k)}; "
                               "re-run litenet export --int8")
        layout[p, 0] = words.add(_padded(w).view(np.int32))
        if f"{name}.bias" in t:
            layout[p, 1] = floats.add(t[f"{name}.bias"])
        s_x = np.float32(t[f"{name}.input_scale"].reshape(()))
        layout[p, 2] = floats.add(s_x * np.asarray(t[f"{name}.weight_scale"], np.float32))  # as dequantize_acc
        layout[p, 3] = floats.add(np.array([s_x], np.float32))
    for i in range(shape.blocks):
        layout[2 + 2 * i, 4] = floats.add(t[f"blocks.{i}.ln.gamma"])
        layout[2 + 2 * i, 5] = floats.add(t[f"blocks.{i}.ln.beta"])
    return PackedNet(shape, "int8", words.array(), floats.array(), layout, plan.classes)


def forward_fp32(shape: NetShape, t: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """The fp32 kernels' NumPy twin: logits (N, C) float32 for uint8 NHWC images.

    The same function as litenet.train.network.forward, from the float parts of the plan executor:
    h = rows(x) We; per block h = LayerNorm(h + (GELU(h W1 + b1) W2 + b2)); z = h Wc + bc.
    """
    h = int8_plan.embed_rows(images, shape.embed, shape.input_shift) @ t["embed.weight"]
    for i in range(shape.blocks):
        p = f"blocks.{i}"
        a = int8_plan.gelu(h @ t[f"{p}.fc1.weight"] + t[f"{p}.fc1.bias"])
        s = h + (a @ t[f"{p}.fc2.weight"] + t[f"{p}.fc2.bias"])
        h = int8_plan.layernorm(s, t[f"{p}.ln.gamma"], t[f"{p}.ln.beta"], shape.ln_eps)
    return (h @ t["head.weight"] + t["head.bias"]).astype(np.float32)


def model_path_note(files: ModelFiles, precision: str) -> Path | None:
    """The file the backend runs, for messages."""
    return files.weights if precision == "fp32" else files.plan
