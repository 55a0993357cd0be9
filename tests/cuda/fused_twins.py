"""The NumPy twins of the fused and BF16 fast kernels (what kernels/*.cu compute in one launch where the
reference tier takes several), composed from litenet.ops, litenet.train.optim and the op-list walk
(litenet.train.network) and nothing else: the harness holds each fast kernel to them, kernel by kernel."""

from __future__ import annotations

import numpy as np

from litenet import forward as fwd
from litenet import ops
from litenet.model import AnyModel, param_views
from litenet.train import network
from litenet.train.optim import adamw_update, grad_average, grad_norm_clip, sgd_momentum_update  # noqa: F401 (twins too)


def bf16_copy(x: np.ndarray) -> np.ndarray:
    """float32 x rounded to BF16 (to nearest, ties to even), as its 16 bits: the twin of bf16_copy.cu
    and of the hardware's cvt.rn.bf16 for finite values."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of BF16 bits (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------------------------
# Twins of fused CUDA kernels: what kernels/*.cu compute in one launch where the reference takes
# several functions, composed from litenet.ops and the op-list walk, and nothing else.


def linear_gelu_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray):
    """u = x W + b;  a = GELU(u)  (kernels/linear.cu: GELU in the product's epilogue). Returns (u, a)."""
    u = ops.linear_forward(x, W, b)
    return u, ops.gelu_forward(u)


def residual_join(ds: np.ndarray, dx_main: np.ndarray):
    """∂x = ∂s + ∂x_main where the identity and main paths meet at a block's input, and the sums
    the path monitor keeps: (‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩)  (kernels/residual_layernorm.cu)."""
    sums = (float(np.vdot(ds, ds)), float(np.vdot(dx_main, dx_main)), float(np.vdot(ds, dx_main)))
    return ds + dx_main, sums


def sgd_clip_update(params, velocity, grads, lr, momentum, weight_decay, threshold, clip_norm):
    """grad_norm_clip then sgd_momentum_update, in place (kernels/sgd.cu). Returns (‖g‖, clipped?)."""
    norm, clipped = grad_norm_clip(grads, threshold, clip_norm)
    sgd_momentum_update(params, velocity, grads, lr, momentum, weight_decay)
    return norm, clipped


def fused_rows(params: np.ndarray, h0: np.ndarray, labels: np.ndarray, model: AnyModel, loss: str = "margin",
               margin: float = 0.3) -> dict:
    """Everything per image from h0 to ∂h0 for an MLP (kernels/fused_rows.cu): the blocks, the head, the
    loss and the backward — the op list walked from h0 both ways. Returns what the kernel writes, named
    as its buffers: X (blocks+1, B, d), U (∂u, which overwrites u), A, NRM, RSTD, DY, DS, Z (∂z, which
    overwrites z), DH0, and the batch loss and path sums it adds to the statistics."""
    tape = fwd.run(network.ops_of(model), param_views(params, model), start={"embed": h0}, keep=True)
    value, _, dz = network.loss_and_dlogits(tape.z, labels, loss, margin)
    d = {}
    _, _, joins = network.backward(params, tape, dz, model, tensor_grads=d)
    blocks = range(model.blocks)
    def stack(arrays):
        return np.stack(arrays) if arrays else np.zeros((0,) + h0.shape, h0.dtype)
    v, c = tape.values, tape.caches
    return {"X": np.stack([h0] + [v[f"blocks.{i}.ln"] for i in blocks]),
            "U": stack([d[f"blocks.{i}.fc1"] for i in blocks]), "A": stack([v[f"blocks.{i}.gelu"] for i in blocks]),
            "NRM": stack([c[f"blocks.{i}.ln"][0] for i in blocks]),
            "RSTD": stack([c[f"blocks.{i}.ln"][1][:, 0] for i in blocks]),
            "DY": stack([d[f"blocks.{i}.ln"] for i in blocks]), "DS": stack([d[f"blocks.{i}.residual"] for i in blocks]),
            "Z": dz, "DH0": d["embed"], "loss": float(value),
            "path": np.array([network.path_sums(j) for j in joins], dtype=np.float64).reshape(model.blocks, 3)}


def fused_weight_grads(rows: dict, images: np.ndarray, p: dict, blocks: int, embed: str,
                       input_shift: float = 0.0) -> dict:
    """Every parameter's gradient from what fused_rows saved (kernels/fused_weight_grads.cu);
    `rows` holds X, A, U (= ∂u), DS, DY, NRM, RSTD, Z (= ∂z), DH0; `images` are the batch's (flipped)
    images. Returns parameter name → gradient."""
    g = {"embed.weight": ops.embed_backward(rows["DH0"], images, p["embed.weight"], embed, input_shift)[0]}
    for i in range(blocks):
        _, g[f"blocks.{i}.fc1.weight"], g[f"blocks.{i}.fc1.bias"] = ops.linear_backward(
            rows["U"][i], rows["X"][i], p[f"blocks.{i}.fc1.weight"], want_dx=False)
        _, g[f"blocks.{i}.fc2.weight"], g[f"blocks.{i}.fc2.bias"] = ops.linear_backward(
            rows["DS"][i], rows["A"][i], p[f"blocks.{i}.fc2.weight"], want_dx=False)
        _, g[f"blocks.{i}.ln.gamma"], g[f"blocks.{i}.ln.beta"] = ops.layernorm_backward(
            rows["DY"][i], (rows["NRM"][i], rows["RSTD"][i][:, None]), p[f"blocks.{i}.ln.gamma"])
    _, g["head.weight"], g["head.bias"] = ops.linear_backward(rows["Z"], rows["X"][blocks], p["head.weight"], want_dx=False)
    return g
