"""The optimisers: the gradient-norm rule, SGD with momentum and AdamW, in NumPy.

The network's ops live in litenet.ops (one definition for training, export and runtime); this module
holds what only training needs. Each function is the twin of the kernels that do the same on the GPU
(kernels/reference/optimizers.cu, and the fast sgd.cu, adamw.cu, grad_average.cu).
"""

from __future__ import annotations

import numpy as np

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
