"""The CUDA inference backend's Mixer on the host: the fp32 weights and the int8 plan in the layouts the
Mixer's launches (litenet/runtime/cuda_mixer.py) read.

fp32 keeps the weights file's own layout — the flat parameter buffer, each weight (in, out) — because
its products are the training kernels' forward products (linear.cu, token_linear.cu), which read
exactly that. int8 packs the plan's (out, in) int8 weights four to an int32 word (dp4a's operand),
each row zero-padded: a channel product's (linear) rows to ⌈K/64⌉·64 bytes, as infer_int8_tiles
reads them (kernels/infer_core.cuh), a product across the patches' (token_linear) rows to ⌈K/16⌉·16
bytes, whole int4 loads for token_linear_int8.cu. Beside them, per product, the multipliers
m[n] = float32(s_x · s_w[n]) (as int8_plan.dequantize_acc forms them), the bias and the input scale
s_x, and each LayerNorm's γ, β.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet import graph
from litenet.errors import LiteNetError
from litenet.model import MixerConfig, param_views
from litenet.runtime import int8_plan
from litenet.runtime.cuda_net import Arena, pad64
from litenet.runtime.model_files import MODEL_HINT, ModelFiles


def pad16(k: int) -> int:
    """A token product's padded k: whole int4 words of four int8 (token_linear_int8.cu)."""
    return (k + 15) // 16 * 16


def padded_k(op: graph.Op) -> int:
    """Bytes of one packed int8 weight row of a product (its K, zero-padded)."""
    k = op.params[0].shape[0]
    return pad16(k) if op.kind == "token_linear" else pad64(k)


@dataclass
class MixerWeights:
    """One precision of a Mixer, packed: what goes to the GPU once.

    fp32: `params` is the flat float32 parameter buffer (litenet.model.param_layout).
    int8: `words` the packed weights; `floats` every multiplier, bias, γ and β; `at` the offset of
    each packed tensor by name ("<op>.weight" in words, "<op>.mult", "<op>.bias", "<ln>.gamma",
    "<ln>.beta" in floats); `scales` each product's input scale s_x by op name.
    """

    model: MixerConfig
    precision: str
    classes: tuple[str, ...]
    params: np.ndarray | None = None
    words: np.ndarray | None = None
    floats: np.ndarray | None = None
    at: dict | None = None
    scales: dict | None = None


def _check_mixer(model) -> MixerConfig:
    if model.family != "mixer":
        raise LiteNetError(f"expected a Mixer model, got the {model.family} family")
    return model


def load_mixer_fp32(files: ModelFiles) -> MixerWeights:
    """weights.safetensors + config.json → the fp32 Mixer."""
    from litenet.weights import load_model

    if files.weights is None or files.config is None:
        raise LiteNetError(f"{files.describe()}: the CUDA backend's fp32 needs weights.safetensors and config.json "
                           f"beside each other; {MODEL_HINT}")
    flat, model, _train, _doc = load_model(files.weights.parent)
    model = _check_mixer(model)
    classes = files.classes or tuple(f"class {i}" for i in range(model.classes))
    return MixerWeights(model, "fp32", classes, params=np.ascontiguousarray(flat, np.float32))


def load_mixer_int8(files: ModelFiles) -> MixerWeights:
    """model.int8.plan.safetensors → the int8 Mixer (refusing a plan exported from other weights)."""
    if files.plan is None:
        raise LiteNetError(f"{files.describe()} has no {int8_plan.PLAN_FILE}; run `litenet export --int8` for it "
                           f"or {MODEL_HINT}")
    plan = int8_plan.load_plan(files.plan)
    files.check_same_weights(plan.metadata, files.plan)
    return pack_mixer_int8(plan)


def pack_mixer_int8(plan: int8_plan.Plan) -> MixerWeights:
    """The int8 plan → packed words, floats and their offsets."""
    model, t = _check_mixer(plan.model), plan.tensors
    words, floats = Arena(np.int32), Arena(np.float32)
    at, scales = {}, {}
    for op in graph.ops_of(model):
        if op.kind == "layernorm":
            at[f"{op.name}.gamma"] = floats.add(t[f"{op.name}.gamma"])
            at[f"{op.name}.beta"] = floats.add(t[f"{op.name}.beta"])
        if op.kind not in graph.PRODUCTS:
            continue
        k, n = op.params[0].shape
        w = np.asarray(t[f"{op.name}.weight"], np.int8)
        if w.shape != (n, k):
            raise LiteNetError(f"{op.name}.weight has shape {w.shape}, the plan's model says {(n, k)}; "
                               "re-run litenet export --int8")
        packed = np.zeros((n, padded_k(op)), np.int8)
        packed[:, :k] = w
        at[f"{op.name}.weight"] = words.add(packed.view(np.int32))
        s_x = np.float32(t[f"{op.name}.input_scale"].reshape(()))
        scales[op.name] = s_x
        at[f"{op.name}.mult"] = floats.add(s_x * np.asarray(t[f"{op.name}.weight_scale"], np.float32))
        at[f"{op.name}.bias"] = floats.add(t[f"{op.name}.bias"])
    classes = plan.classes or tuple(f"class {i}" for i in range(model.classes))
    return MixerWeights(model, "int8", classes, words=words.array(), floats=floats.array(), at=at, scales=scales)


class MixerDeviceNet:
    """A MixerWeights on the device (uploaded once), with views of each tensor by name and dummies."""

    def __init__(self, dev, packed: MixerWeights):
        self.dev, self.packed, self.shape, self.precision = dev, packed, packed.model, packed.precision
        self.dummy_f = dev.to_device(np.zeros(4, np.float32))
        self.dummy_i = dev.to_device(np.zeros(4, np.int32))
        self.dummy_u = dev.to_device(np.zeros(4, np.uint32))
        if packed.precision == "fp32":
            self.params = dev.to_device(packed.params)
            self.tensors = param_views(self.params, packed.model)
        else:
            self.words, self.floats = dev.to_device(packed.words), dev.to_device(packed.floats)

    def weight(self, op: graph.Op):
        """fp32: the (in, out) weight; int8: the packed (out, padded in / 4) words."""
        if self.precision == "fp32":
            return self.tensors[op.param("weight")]
        _k, n = op.params[0].shape
        off = self.packed.at[f"{op.name}.weight"]
        return self.words[off:off + n * padded_k(op) // 4]

    def floats_of(self, name: str, size: int):
        """int8: a float tensor of the packed arena ("<op>.mult", "<op>.bias", "<ln>.gamma", …)."""
        off = self.packed.at[name]
        return self.floats[off:off + size]

    def vector(self, op: graph.Op, kind: str):
        """An op's bias, γ or β (fp32: the parameter view; int8: the packed float)."""
        if self.precision == "fp32":
            return self.tensors[op.param(kind)]
        size = op.params[0].shape[-1] if kind == "bias" else op.params[0].shape[0]
        return self.floats_of(f"{op.name}.{kind}", size)

    def scale(self, op: graph.Op) -> np.float32:
        """int8: the input scale s_x of a product."""
        return np.float32(self.packed.scales[op.name])

    def describe(self) -> str:
        m = self.shape
        return f"Mixer P={m.patch} d={m.width} token {m.token_hidden} channel {m.channel_hidden} × {m.blocks}"
