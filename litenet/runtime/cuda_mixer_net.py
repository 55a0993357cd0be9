"""The CUDA inference backend's int8 Mixer on the host: the int8 plan in the layout its launches
(litenet/lowering/fast/int8_tokens.py) read. (The fp32 Mixer reads the flat parameters, each weight
(in, out), as the training kernels' forward products do.)

The plan's (out, in) int8 weights are packed four to an int32 word (dp4a's operand), each row
zero-padded: a channel product's (linear) rows to ⌈K/64⌉·64 bytes, as infer_int8_tiles reads them
(kernels/infer_core.cuh), a product across the patches' (token_linear) rows to ⌈K/16⌉·16 bytes, whole
int4 loads for token_linear_int8.cu. Beside them, per product, the multipliers m[n] = float32(s_x · s_w[n])
(as int8_plan.dequantize_acc forms them), the bias and the input scale s_x, and each LayerNorm's γ, β.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet import graph
from litenet.errors import LiteNetError
from litenet.gpu.infer_layout import padded_k
from litenet.model import MixerConfig
from litenet.runtime import int8_plan
from litenet.runtime.cuda_net import Arena
from litenet.runtime.model_files import MODEL_HINT, ModelFiles


@dataclass
class MixerWeights:
    """The int8 Mixer, packed: what goes to the GPU once. `words` the packed weights; `floats` every
    multiplier, bias, γ and β; `at` the offset of each packed tensor by name ("<op>.weight" in words,
    "<op>.mult", "<op>.bias", "<ln>.gamma", "<ln>.beta" in floats); `scales` each product's input scale
    s_x by op name."""

    model: MixerConfig
    classes: tuple[str, ...]
    words: np.ndarray
    floats: np.ndarray
    at: dict
    scales: dict


def _check_mixer(model) -> MixerConfig:
    if model.family != "mixer":
        raise LiteNetError(f"expected a Mixer model, got the {model.family} family")
    return model


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
    return MixerWeights(model, classes, words.array(), floats.array(), at, scales)
