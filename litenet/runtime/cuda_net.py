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

from dataclasses import dataclass

import numpy as np

from litenet import forward, graph
from litenet.errors import LiteNetError
from litenet.gpu.infer_layout import layers, pad64, phases
from litenet.model import ModelConfig, param_views
from litenet.runtime import int8_plan
from litenet.runtime.model_files import MODEL_HINT, ModelFiles

LAYOUT_WIDTH = 6  # IL_WIDTH in infer_core.cuh
NO_TENSOR = -1


def check_family(model) -> None:
    """The inference kernels run the MLP family; anything else is refused in one line (auto then picks ONNX Runtime)."""
    if model.family != "mlp":
        raise LiteNetError(f"LiteNet's CUDA inference kernels run the MLP family, not the {model.family}; "
                           "use --backend onnxruntime (auto does)")


@dataclass
class PackedNet:
    """One precision of a model, packed: what goes to the GPU once."""

    shape: ModelConfig  # the architecture, as the kernels read it
    precision: str
    words: np.ndarray     # fp32: every tensor (float32); int8: the weights (int32 words)
    floats: np.ndarray    # int8: multipliers, biases, scales, γ, β (float32); fp32: same array as words
    layout: np.ndarray    # (phases, LAYOUT_WIDTH) int32
    classes: tuple[str, ...]

    def scale(self, phase: int) -> float:
        """int8: the input scale of a phase's layer."""
        return float(self.floats[self.layout[phase, 3]])


class Arena:
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


def load_fp32(files: ModelFiles) -> tuple[ModelConfig, dict[str, np.ndarray], tuple[str, ...]]:
    """weights.safetensors + config.json → (shape, float32 tensors by name as in the weights file, classes)."""
    from litenet.weights import load_model

    if files.weights is None or files.config is None:
        raise LiteNetError(f"{files.describe()}: the CUDA backend's fp32 needs weights.safetensors and config.json "
                           f"beside each other; {MODEL_HINT}")
    flat, model, _train, _doc = load_model(files.weights.parent)
    check_family(model)
    tensors = {k: np.asarray(v, np.float32) for k, v in param_views(flat, model).items()}
    return model, tensors, files.classes or tuple(f"class {i}" for i in range(model.classes))


def pack_fp32(shape: ModelConfig, t: dict[str, np.ndarray], classes=()) -> PackedNet:
    """Float weights (in, out) → the fp32 kernels' arena and layout."""
    arena = Arena(np.float32)
    layout = np.full((phases(shape), LAYOUT_WIDTH), NO_TENSOR, np.int32)
    for p, (name, _n, _k) in enumerate(layers(shape)):
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
    check_family(plan.model)
    return plan


def pack_int8(plan: int8_plan.Plan) -> PackedNet:
    """The int8 plan → the int8 kernels' word arena (weights), float arena and layout."""
    shape, t = plan.model, plan.tensors
    check_family(shape)
    words, floats = Arena(np.int32), Arena(np.float32)
    layout = np.full((phases(shape), LAYOUT_WIDTH), NO_TENSOR, np.int32)
    for p, (name, n, k) in enumerate(layers(shape)):
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


def forward_fp32(shape: ModelConfig, t: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """The fp32 kernels' NumPy twin: logits (N, C) float32 for uint8 NHWC images — the op list
    walked with float32 weights (litenet.forward), nothing written again."""
    return forward.run(graph.ops_of(shape), t, images).z.astype(np.float32)
