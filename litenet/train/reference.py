"""The training-only NumPy twins: the optimisers, and what the fused CUDA kernels compute in one launch.

The network's ops live in litenet.ops (one definition for training, export and runtime). This module
holds what only training needs: the gradient-norm rule, SGD with momentum and AdamW — each the twin
of the kernel of its name in `kernels/` — and the twins of the fused kernels, composed from
litenet.ops and the op-list walk (litenet.train.network) and nothing else.
"""

from __future__ import annotations

import numpy as np

from litenet import forward as fwd
from litenet import ops
from litenet.model import AnyModel, param_views
from litenet.train import network

# ---------------------------------------------------------------------------------------------
# Optimisers: global gradient norm with the seed's clip rule, SGD with momentum, AdamW


def grad_norm_clip(grads: np.ndarray, threshold: float, clip_norm: float):
    """n = ‖g‖₂ over every parameter; when n > threshold, g ← g · clip_norm / n (in place).

    The seed rescales to 1.0 only once the norm passes 10, so small clips never happen: the rule
    is a fuse against blow-ups, not a steady limit. Returns (n, clipped?).
    """
    norm = float(np.sqrt(np.dot(grads, grads)))
    clipped = norm > threshold
    if clipped:
        grads *= grads.dtype.type(clip_norm / norm)
    return norm, clipped


def grad_average(grads: np.ndarray, world_size: int) -> None:
    """ḡ = (Σ_r g_r) · (1/N) in place: the mean of N ranks' gradients from the sum an all-reduce
    leaves (data-parallel training, docs/parallel.md). One rounded product, as the kernel's."""
    grads *= grads.dtype.type(1.0 / world_size)


def sgd_momentum_update(params: np.ndarray, velocity: np.ndarray, grads: np.ndarray,
                        lr: float, momentum: float, weight_decay, scratch: np.ndarray | None = None) -> None:
    """g' = g + wd · w;  v ← μ v + g';  w ← w − lr · v   (PyTorch's SGD convention, in place).

    `weight_decay` is a number, or an array like params (0 where a tensor does not decay).
    `scratch`, a buffer shaped like params, holds the products, so a trainer need not allocate two
    parameter-sized temporaries every step (a tenth of the update's time; docs/decisions.md, "CPU
    training"). Same numbers either way.
    """
    scratch = np.empty_like(params) if scratch is None else scratch
    velocity *= velocity.dtype.type(momentum)
    velocity += grads
    decay = velocity.dtype.type(weight_decay) if np.isscalar(weight_decay) else weight_decay
    velocity += np.multiply(params, decay, out=scratch)
    params -= np.multiply(velocity, params.dtype.type(lr), out=scratch)


def adamw_update(params: np.ndarray, m: np.ndarray, v: np.ndarray, grads: np.ndarray, step: int, lr: float,
                 beta1: float, beta2: float, eps: float, weight_decay) -> None:
    """AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW), in place, at the 1-based `step`:

        w ← w − lr · wd · w                          decoupled decay (wd: a number, or 0/wd per entry)
        m ← β₁ m + (1 − β₁) g;   v ← β₂ v + (1 − β₂) g²
        w ← w − lr · m̂ / (√v̂ + eps),   m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ)

    written as PyTorch computes it: w −= (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + eps).
    """
    f = params.dtype.type
    decay = f(weight_decay) if np.isscalar(weight_decay) else weight_decay
    params *= 1 - f(lr) * decay
    m *= f(beta1)
    m += f(1.0 - beta1) * grads
    v *= f(beta2)
    v += f(1.0 - beta2) * (grads * grads)
    bias1, bias2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
    denominator = np.sqrt(v) / f(np.sqrt(bias2)) + f(eps)
    params -= f(lr / bias1) * (m / denominator)


# ---------------------------------------------------------------------------------------------
# BF16 copies of the wide products' operands (kernels/bf16_copy.cu)


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
