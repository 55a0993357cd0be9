"""The NumPy reference: every operation of LiteNet, forward and backward, written to be read.

Each function is the twin of the CUDA kernel of the same name in `kernels/` and is the living
definition of what that kernel must compute. Shapes: B is the batch, d the width, H the hidden
width, C the classes. Everything works in float32 and float64 (the dtype of the inputs wins).
"""

from __future__ import annotations

import numpy as np

GELU_C = 0.7978845608028654  # √(2/π), the tanh form's constant (SPEC.md rounds it to 0.79788456)
GELU_K = 0.044715


# ---------------------------------------------------------------------------------------------
# Embedding projection


def pixels_to_float(images: np.ndarray, dtype=np.float32) -> np.ndarray:
    """uint8 NHWC images → floats in [0, 1] (x / 255), the only scaling LiteNet applies."""
    if images.dtype == np.uint8:
        return np.divide(images, dtype(255), dtype=dtype)  # one pass: cast and divide together
    return images.astype(dtype, copy=False)


def embed_inputs(x: np.ndarray, embed: str, input_shift: float = 0.0) -> np.ndarray:
    """The rows the embedding matrix multiplies: (B, 1024) colour sums or (B, 3072) NHWC values.

    channel-sum: s[b, i] = Σ_k (x[b, i, k] − shift)   over the 3 colours k of pixel i
    full:        s[b, i·3 + k] = x[b, i, k] − shift   (NHWC order: pixel-major, colour-minor)
    """
    batch = x.shape[0]
    pixels = x.reshape(batch, 1024, 3)
    if input_shift:
        pixels = pixels - x.dtype.type(input_shift)
    if embed == "channel-sum":
        return pixels[:, :, 0] + pixels[:, :, 1] + pixels[:, :, 2]  # R + G + B (a .sum(axis=2) is 10× slower)
    return pixels.reshape(batch, 3072)


def embed_forward(x: np.ndarray, W: np.ndarray, embed: str, input_shift: float = 0.0) -> np.ndarray:
    """h0 = s(x) @ We, no bias. x: (B, 32, 32, 3) floats in [0, 1] or uint8; We: (1024 | 3072, d)."""
    x = pixels_to_float(x, W.dtype.type)
    return embed_inputs(x, embed, input_shift) @ W


def embed_backward(dh: np.ndarray, x: np.ndarray, W: np.ndarray, embed: str, input_shift: float = 0.0,
                   want_dx: bool = False, inputs: np.ndarray | None = None):
    """∂We = sᵀ ∂h0;  ∂s = ∂h0 Weᵀ, spread back over the colours a sum took (∂x[b,i,k] = ∂s[b,i]).

    `inputs` is s(x) when the caller kept it from the forward (it saves recomputing it).
    Returns (dW, dx) with dx None unless asked for (training never needs it; saliency does).
    """
    x = pixels_to_float(x, W.dtype.type)
    s = embed_inputs(x, embed, input_shift) if inputs is None else inputs
    dW = s.T @ dh
    if not want_dx:
        return dW, None
    ds = dh @ W.T
    if embed == "channel-sum":
        dx = np.repeat(ds[:, :, None], 3, axis=2)
    else:
        dx = ds.reshape(-1, 1024, 3)
    return dW, dx.reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# Linear layer (used by fc1, fc2 and the head)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y = x W + b.   x: (B, n_in), W: (n_in, n_out), b: (n_out,)."""
    return x @ W + b


def linear_backward(dy: np.ndarray, x: np.ndarray, W: np.ndarray, want_dx: bool = True):
    """∂x = ∂y Wᵀ,  ∂W = xᵀ ∂y,  ∂b = Σ_b ∂y.  Returns (dx or None, dW, db)."""
    dW = x.T @ dy
    db = dy.sum(axis=0)
    dx = dy @ W.T if want_dx else None
    return dx, dW, db


# ---------------------------------------------------------------------------------------------
# GELU, tanh form


def gelu_forward(u: np.ndarray) -> np.ndarray:
    """a = ½ u (1 + tanh(c (u + 0.044715 u³))),  c = √(2/π)."""
    t = np.tanh(GELU_C * (u + GELU_K * (u * u * u)))  # u*u*u: np.power is several times slower
    return 0.5 * u * (1.0 + t)


def gelu_backward(da: np.ndarray, u: np.ndarray) -> np.ndarray:
    """∂u = ∂a · [½ (1 + t) + ½ u (1 − t²) c (1 + 3·0.044715 u²)],  t = tanh(c (u + 0.044715 u³)).

    This is the exact derivative of the tanh form (not of the erf GELU), so the finite-difference
    check can hold it to 1e-6.
    """
    t = np.tanh(GELU_C * (u + GELU_K * (u * u * u)))  # u*u*u: np.power is several times slower
    dt_du = (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_K * u * u)
    return da * (0.5 * (1.0 + t) + 0.5 * u * dt_du)


# ---------------------------------------------------------------------------------------------
# Residual add + LayerNorm over the d features


def residual_layernorm_forward(x: np.ndarray, v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """s = x + v;  n = (s − μ) / √(σ² + eps) (μ, σ² over the d features);  y = γ n + β.

    Returns y and the cache (n, rstd) the backward needs.
    """
    s = x + v
    mu = s.mean(axis=1, keepdims=True)
    var = ((s - mu) ** 2).mean(axis=1, keepdims=True)  # biased, as LayerNorm defines it
    rstd = 1.0 / np.sqrt(var + s.dtype.type(eps))
    n = (s - mu) * rstd
    return gamma * n + beta, (n, rstd)


def residual_layernorm_backward(dy: np.ndarray, cache, gamma: np.ndarray):
    """∂n = ∂y γ;  ∂s = rstd (∂n − mean(∂n) − n · mean(∂n n));  ∂γ = Σ_b ∂y n;  ∂β = Σ_b ∂y.

    ∂s reaches both summands unchanged (∂x = ∂v = ∂s): the identity path and the main path.
    """
    n, rstd = cache
    dn = dy * gamma
    ds = rstd * (dn - dn.mean(axis=1, keepdims=True) - n * (dn * n).mean(axis=1, keepdims=True))
    return ds, (dy * n).sum(axis=0), dy.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# Losses (mean over the batch)


def rival_class(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """r_i = argmax_{j ≠ y_i} z[i, j] (first index on ties), the only class the margin loss pushes down."""
    masked = z.copy()
    masked[np.arange(len(labels)), labels] = -np.inf
    return masked.argmax(axis=1)


def margin_loss_forward(z: np.ndarray, labels: np.ndarray, margin: float):
    """L = mean_i max(0, m − z[i, y_i] + max_{j≠y_i} z[i, j]).  Returns (L, per-sample losses)."""
    rows = np.arange(len(labels))
    per_sample = np.maximum(0.0, margin - z[rows, labels] + z[rows, rival_class(z, labels)])
    return per_sample.mean(), per_sample


def margin_loss_backward(z: np.ndarray, labels: np.ndarray, margin: float) -> np.ndarray:
    """Subgradient: where the hinge is active, ∂z[i, y_i] = −1/B and ∂z[i, r_i] = +1/B; zero elsewhere."""
    rows = np.arange(len(labels))
    rival = rival_class(z, labels)
    active = (margin - z[rows, labels] + z[rows, rival]) > 0
    dz = np.zeros_like(z)
    weight = active.astype(z.dtype) / len(labels)
    dz[rows, labels] -= weight
    dz[rows, rival] += weight
    return dz


def softmax(z: np.ndarray) -> np.ndarray:
    """p = exp(z − max z) / Σ exp(z − max z), shifted so exp never overflows."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cross_entropy_forward(z: np.ndarray, labels: np.ndarray):
    """L = mean_i −log softmax(z_i)[y_i] = mean_i (logsumexp(z_i) − z[i, y_i])."""
    zmax = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - zmax).sum(axis=1)) + zmax[:, 0]
    per_sample = lse - z[np.arange(len(labels)), labels]
    return per_sample.mean(), per_sample


def cross_entropy_backward(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """∂z = (softmax(z) − onehot(y)) / B."""
    dz = softmax(z)
    dz[np.arange(len(labels)), labels] -= 1.0
    return dz / len(labels)


# ---------------------------------------------------------------------------------------------
# Optimiser: global gradient norm with the seed's clip rule, then SGD with momentum


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
                        lr: float, momentum: float, weight_decay: float, scratch: np.ndarray | None = None) -> None:
    """g' = g + wd · w;  v ← μ v + g';  w ← w − lr · v   (PyTorch's SGD convention, in place).

    `scratch`, a buffer shaped like params, holds the products, so a trainer need not allocate two
    parameter-sized temporaries every step (litenet-base on a 2-core EPYC: 2.9 instead of 3.2 ms per
    update). Same numbers either way.
    """
    scratch = np.empty_like(params) if scratch is None else scratch
    velocity *= velocity.dtype.type(momentum)
    velocity += grads
    velocity += np.multiply(params, velocity.dtype.type(weight_decay), out=scratch)
    params -= np.multiply(velocity, params.dtype.type(lr), out=scratch)


# ---------------------------------------------------------------------------------------------
# Twins of fused CUDA kernels: what kernels/*.cu compute in one launch where the reference takes
# several functions, composed from the functions above and nothing else.


def linear_gelu_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray):
    """u = x W + b;  a = GELU(u)  (kernels/linear.cu: GELU in the product's epilogue). Returns (u, a)."""
    u = linear_forward(x, W, b)
    return u, gelu_forward(u)


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


def fused_rows(p: dict, h0: np.ndarray, labels: np.ndarray, blocks: int, loss: str = "margin",
               margin: float = 0.3, eps: float = 1e-5) -> dict:
    """Everything per image from h0 to ∂h0 (kernels/fused_rows.cu): the blocks, the head, the loss
    and the backward. `p` maps parameter names to arrays. Returns what the kernel writes, named as
    its buffers: X (blocks+1, B, d), U (∂u, which overwrites u), A, NRM, RSTD, DY, DS, Z (∂z,
    which overwrites z), DH0, and the batch loss and path sums it adds to the statistics."""
    x, X, U, A, caches = h0, [h0], [], [], []
    for i in range(blocks):
        u, a = linear_gelu_forward(x, p[f"blocks.{i}.fc1.weight"], p[f"blocks.{i}.fc1.bias"])
        v = linear_forward(a, p[f"blocks.{i}.fc2.weight"], p[f"blocks.{i}.fc2.bias"])
        x, cache = residual_layernorm_forward(x, v, p[f"blocks.{i}.ln.gamma"], p[f"blocks.{i}.ln.beta"], eps)
        X.append(x), U.append(u), A.append(a), caches.append(cache)
    z = linear_forward(x, p["head.weight"], p["head.bias"])
    if loss == "margin":
        value, _ = margin_loss_forward(z, labels, margin)
        dz = margin_loss_backward(z, labels, margin)
    else:
        value, _ = cross_entropy_forward(z, labels)
        dz = cross_entropy_backward(z, labels)
    dy = linear_backward(dz, x, p["head.weight"])[0]
    DY, DS, DU, path = [None] * blocks, [None] * blocks, [None] * blocks, [None] * blocks
    for i in reversed(range(blocks)):
        DY[i] = dy
        DS[i] = residual_layernorm_backward(dy, caches[i], p[f"blocks.{i}.ln.gamma"])[0]
        da = linear_backward(DS[i], A[i], p[f"blocks.{i}.fc2.weight"])[0]
        DU[i] = gelu_backward(da, U[i])
        dx_main = linear_backward(DU[i], X[i], p[f"blocks.{i}.fc1.weight"])[0]
        dy, path[i] = residual_join(DS[i], dx_main)
    stack = lambda arrays: np.stack(arrays) if arrays else np.zeros((0,) + h0.shape, h0.dtype)  # noqa: E731
    return {"X": np.stack(X), "U": stack(DU), "A": stack(A), "NRM": stack([c[0] for c in caches]),
            "RSTD": stack([c[1][:, 0] for c in caches]), "DY": stack(DY), "DS": stack(DS), "Z": dz,
            "DH0": dy, "loss": float(value), "path": np.array(path, dtype=np.float64).reshape(blocks, 3)}


def fused_weight_grads(rows: dict, images: np.ndarray, p: dict, blocks: int, embed: str,
                       input_shift: float = 0.0) -> dict:
    """Every parameter's gradient from what fused_rows saved (kernels/fused_weight_grads.cu);
    `rows` holds X, A, U (= ∂u), DS, DY, NRM, RSTD, Z (= ∂z), DH0; `images` are the batch's (flipped)
    images. Returns parameter name → gradient."""
    g = {"embed.weight": embed_backward(rows["DH0"], images, p["embed.weight"], embed, input_shift)[0]}
    for i in range(blocks):
        _, g[f"blocks.{i}.fc1.weight"], g[f"blocks.{i}.fc1.bias"] = linear_backward(
            rows["U"][i], rows["X"][i], p[f"blocks.{i}.fc1.weight"], want_dx=False)
        _, g[f"blocks.{i}.fc2.weight"], g[f"blocks.{i}.fc2.bias"] = linear_backward(
            rows["DS"][i], rows["A"][i], p[f"blocks.{i}.fc2.weight"], want_dx=False)
        _, g[f"blocks.{i}.ln.gamma"], g[f"blocks.{i}.ln.beta"] = residual_layernorm_backward(
            rows["DY"][i], (rows["NRM"][i], rows["RSTD"][i][:, None]), p[f"blocks.{i}.ln.gamma"])
    _, g["head.weight"], g["head.bias"] = linear_backward(rows["Z"], rows["X"][blocks], p["head.weight"], want_dx=False)
    return g
