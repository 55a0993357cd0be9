"""The NumPy maths of every LiteNet op, forward and backward, written to be read.

This is the one definition of what each op computes: the training reference, the exporters, the
int8 plan, the runtime and `litenet trace` all call these functions (through the op lists of
litenet.graph), and every CUDA kernel in `kernels/` is held to the function of its name. NumPy
only, so the runtime may import it. Everything works in float32 and float64 (the inputs' dtype
wins).

Shapes: B is the batch, d the width, H a hidden width, C the classes. The Mixer keeps its
activations tokens-major, (T, B, d) with T patches: a product over the channels is then one matrix
product over T·B rows, and a product over the patches one matrix product over B·d columns, with no
transposed copy in either direction.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GELU_C = 0.7978845608028654  # √(2/π), the tanh form's constant (docs/spec.md rounds it to 0.79788456)
GELU_K = 0.044715
IMAGE_SIDE = 32


# Elementwise ops over large arrays run in two threads, each on half of the values, and each thread
# walks its half in chunks of CHUNK_VALUES values: every step of a formula is a pass over its
# arrays, and on a chunk those passes stay in the core's cache instead of going to memory (GELU twice
# as fast on litenet-mixer's 8.4 M values; 2^17 values, 512 KiB an array, suits a core with 1 MiB of
# L2: docs/decisions.md, "CPU training"). NumPy releases the GIL inside its loops, and every value is
# computed exactly as in one pass over the whole array (same bits). PyTorch's CPU kernels, the peer of bench/bench_cpu*.py, use the cores the same way.
THREADS = max(1, min(2, os.cpu_count() or 1))
MIN_SPLIT = 1 << 16  # below this many values a thread's start-up costs more than it saves
CHUNK_VALUES = 1 << 17  # 512 KiB of float32 per array
_pool = None


def in_parts(work, *arrays) -> None:
    """work(*views) over the flat arrays (all of one size, C-contiguous: a view of each part must be
    the array's own memory, or an output would be written into a copy), in THREADS parts at once,
    each part walked in chunks of CHUNK_VALUES values."""
    if not all(a.flags.c_contiguous for a in arrays):
        raise ValueError("in_parts needs C-contiguous arrays")
    flat = [a.reshape(-1) for a in arrays]
    size = flat[0].size
    if THREADS == 1 or size < MIN_SPLIT:
        return _in_chunks(work, flat, 0, size)
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="litenet-ops")
    bounds = np.linspace(0, size, THREADS + 1).astype(int)
    parts = [_pool.submit(_in_chunks, work, flat, lo, hi) for lo, hi in itertools.pairwise(bounds)]
    for part in parts:
        part.result()


def _in_chunks(work, flat, lo: int, hi: int) -> None:
    for start in range(lo, hi, CHUNK_VALUES):
        work(*(a[start:min(start + CHUNK_VALUES, hi)] for a in flat))


# ---------------------------------------------------------------------------------------------
# Pixels in


def pixels_to_float(images: np.ndarray, dtype=np.float32) -> np.ndarray:
    """uint8 NHWC images → floats in [0, 1] (x / 255), the only scaling LiteNet applies."""
    if images.dtype == np.uint8:
        return np.divide(images, dtype(255), dtype=dtype)  # one pass: cast and divide together
    return images.astype(dtype, copy=False)


def embed_inputs(x: np.ndarray, embed: str, input_shift: float = 0.0) -> np.ndarray:
    """The rows the MLP's embedding matrix multiplies: (B, 1024) colour sums or (B, 3072) values.

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


def embed_inputs_backward(ds: np.ndarray, embed: str) -> np.ndarray:
    """∂x[b, i, k] = ∂s[b, i] for a colour sum (each colour took part once), ∂s reshaped otherwise."""
    if embed == "channel-sum":
        return np.repeat(ds[:, :, None], 3, axis=2).reshape(-1, IMAGE_SIDE, IMAGE_SIDE, 3)
    return ds.reshape(-1, IMAGE_SIDE, IMAGE_SIDE, 3)


def embed_forward(x: np.ndarray, W: np.ndarray, embed: str, input_shift: float = 0.0) -> np.ndarray:
    """h0 = s(x) @ We, no bias (kernels/embed.cu). x: (B, 32, 32, 3) floats in [0, 1] or uint8; We: (1024 | 3072, d)."""
    x = pixels_to_float(x, W.dtype.type)
    return linear_forward(embed_inputs(x, embed, input_shift), W)


def embed_backward(dh: np.ndarray, x: np.ndarray, W: np.ndarray, embed: str, input_shift: float = 0.0,
                   want_dx: bool = False, inputs: np.ndarray | None = None):
    """∂We = sᵀ ∂h0;  ∂s = ∂h0 Weᵀ, spread back over the colours a sum took (kernels/embed.cu).

    `inputs` is s(x) when the caller kept it from the forward (it saves recomputing it).
    Returns (dW, dx) with dx None unless asked for (training never needs it; saliency does).
    """
    x = pixels_to_float(x, W.dtype.type)
    s = embed_inputs(x, embed, input_shift) if inputs is None else inputs
    ds, dW, _ = linear_backward(dh, s, W, want_dx=want_dx)
    return dW, (embed_inputs_backward(ds, embed) if want_dx else None)


def patchify(x: np.ndarray, patch: int, input_shift: float = 0.0, input_scale: float = 1.0) -> np.ndarray:
    """(B, 32, 32, 3) → (T, B, P·P·3) patches, T = (32/P)², tokens-major; each patch row-major,
    colour-minor: p[gy·G + gx, b, (py·P + px)·3 + k] = (x[b, gy·P + py, gx·P + px, k] − shift) · scale."""
    batch, grid = x.shape[0], IMAGE_SIDE // patch
    tiles = x.reshape(batch, grid, patch, grid, patch, 3).transpose(1, 3, 0, 2, 4, 5)
    patches = tiles.reshape(grid * grid, batch, patch * patch * 3)  # a copy into token order (a view when P = 32)
    if input_shift:
        patches = patches - patches.dtype.type(input_shift)
    return patches * patches.dtype.type(input_scale) if input_scale != 1.0 else patches


def patchify_backward(dp: np.ndarray, patch: int, input_scale: float = 1.0) -> np.ndarray:
    """∂x: each pixel belongs to exactly one patch, so ∂p (times the scale) is put back where patchify took it."""
    grid, batch = IMAGE_SIDE // patch, dp.shape[1]
    tiles = dp.reshape(grid, grid, batch, patch, patch, 3).transpose(2, 0, 3, 1, 4, 5)
    dx = tiles.reshape(batch, IMAGE_SIDE, IMAGE_SIDE, 3)
    return dx * dx.dtype.type(input_scale) if input_scale != 1.0 else dx


# ---------------------------------------------------------------------------------------------
# Products: over the last axis (channels) and over the first axis (the Mixer's patches)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """y = x W + b over the last axis.   x: (..., n_in), W: (n_in, n_out), b: (n_out,) or None."""
    y = x.reshape(-1, x.shape[-1]) @ W  # every leading axis is a row: one matrix product
    y = y if b is None else y + b
    return y.reshape(*x.shape[:-1], W.shape[1])


def linear_backward(dy: np.ndarray, x: np.ndarray, W: np.ndarray, want_dx: bool = True):
    """∂x = ∂y Wᵀ,  ∂W = xᵀ ∂y,  ∂b = Σ_rows ∂y.  Returns (dx or None, dW, db)."""
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dW = x2.T @ dy2
    db = dy2.sum(axis=0)
    dx = (dy2 @ W.T).reshape(x.shape) if want_dx else None
    return dx, dW, db


def token_linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y[j, b, c] = Σ_t W[t, j] x[t, b, c] + b[j]: an MLP layer along the patches, the same for every
    image and channel.   x: (T, B, d) tokens-major, W: (T, T'), b: (T',)  →  (T', B, d)."""
    x2 = x.reshape(x.shape[0], -1)  # (T, B·d): one matrix product for the whole batch
    y = W.T @ x2 + b[:, None]
    return y.reshape(W.shape[1], *x.shape[1:])


def token_linear_backward(dy: np.ndarray, x: np.ndarray, W: np.ndarray, want_dx: bool = True):
    """∂x = W ∂y,  ∂W = x ∂yᵀ (summed over images and channels),  ∂b[j] = Σ_{b,c} ∂y[j, b, c]."""
    x2, dy2 = x.reshape(x.shape[0], -1), dy.reshape(dy.shape[0], -1)
    dW = x2 @ dy2.T
    db = dy2.sum(axis=1)
    dx = (W @ dy2).reshape(x.shape) if want_dx else None
    return dx, dW, db


# ---------------------------------------------------------------------------------------------
# GELU, tanh form


def gelu_forward(u: np.ndarray, keep_tanh: bool = False):
    """a = ½ u (1 + tanh(c (u + 0.044715 u³))),  c = √(2/π).

    With keep_tanh, returns (a, t) with t = tanh(…), which gelu_backward can reuse.
    """
    u = np.ascontiguousarray(u)  # a product's output may be a transposed view
    a, t = np.empty_like(u), np.empty_like(u)
    in_parts(_gelu_forward_into, u, a, t)
    return (a, t) if keep_tanh else a


def _gelu_forward_into(u, a, t) -> None:
    # NOTE: in-place steps in the formula's own order (so the same bits as the one-line formula):
    # a training step runs GELU over millions of values, and each temporary is a pass over memory.
    np.multiply(u, u, out=t)
    t *= u                   # u³ (u*u*u: np.power is several times slower)
    t *= GELU_K
    t += u                   # u + 0.044715 u³
    t *= GELU_C
    np.tanh(t, out=t)        # t = tanh(c (u + 0.044715 u³))
    np.add(t, 1.0, out=a)
    a *= u * 0.5             # a = ½ u (1 + t)


def gelu_backward(da: np.ndarray, u: np.ndarray, t: np.ndarray | None = None) -> np.ndarray:
    """∂u = ∂a · [½ (1 + t) + ½ u (1 − t²) c (1 + 3·0.044715 u²)],  t = tanh(c (u + 0.044715 u³)).

    This is the exact derivative of the tanh form (not of the erf GELU), so the finite-difference
    check can hold it to 1e-6. `t` is the forward's (gelu_forward(u, keep_tanh=True)), recomputed
    when not given.
    """
    if t is None:
        t = gelu_forward(u, keep_tanh=True)[1]
    da, u, t = (np.ascontiguousarray(a) for a in (da, u, t))
    du = np.empty_like(u)
    in_parts(_gelu_backward_into, da, u, t, du)
    return du


def _gelu_backward_into(da, u, t, du) -> None:
    w = u * (3.0 * GELU_K)   # (in-place steps in the formula's order, as _gelu_forward_into)
    w *= u
    w += 1.0                 # 1 + 3·0.044715 u²
    np.multiply(t, t, out=du)
    np.subtract(1.0, du, out=du)
    du *= GELU_C             # (1 − t²) c
    du *= w                  # dt/du
    np.multiply(u, 0.5, out=w)
    w *= du                  # ½ u dt/du
    np.add(t, 1.0, out=du)
    du *= 0.5                # ½ (1 + t)
    du += w
    du *= da


# ---------------------------------------------------------------------------------------------
# LayerNorm over the last axis (the d features), and the residual sum in front of it


def layernorm_forward(s: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """n = (s − μ) / √(σ² + eps) (μ, σ² over the last axis);  y = γ n + β.

    Returns y and the cache (n, rstd) the backward needs. (In-place steps, as gelu_forward.)
    """
    mu = s.mean(axis=-1, keepdims=True)
    n = s - mu
    var = (n * n).mean(axis=-1, keepdims=True)  # biased, as LayerNorm defines it
    rstd = 1.0 / np.sqrt(var + s.dtype.type(eps))
    n *= rstd                # n = (s − μ) · rstd
    y = n * gamma
    y += beta                # y = γ n + β
    return y, (n, rstd)


def layernorm_backward(dy: np.ndarray, cache, gamma: np.ndarray):
    """∂n = ∂y γ;  ∂s = rstd (∂n − mean(∂n) − n · mean(∂n n));  ∂γ = Σ_rows ∂y n;  ∂β = Σ_rows ∂y."""
    n, rstd = cache
    dn = dy * gamma
    w = dn * n
    m2 = w.mean(axis=-1, keepdims=True)  # mean(∂n n)
    ds = dn - dn.mean(axis=-1, keepdims=True)
    np.multiply(n, m2, out=w)
    ds -= w
    ds *= rstd               # ∂s = rstd (∂n − mean(∂n) − n · mean(∂n n))
    rows = dy.reshape(-1, dy.shape[-1])
    np.multiply(dy, n, out=w)
    return ds, w.reshape(rows.shape).sum(axis=0), rows.sum(axis=0)


def residual_layernorm_forward(x: np.ndarray, v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """s = x + v, then layernorm_forward(s): the MLP block's closing step (kernels/residual_layernorm.cu)."""
    return layernorm_forward(x + v, gamma, beta, eps)


def residual_layernorm_backward(dy: np.ndarray, cache, gamma: np.ndarray):
    """layernorm_backward; ∂s reaches both summands unchanged (∂x = ∂v = ∂s): the identity path and the main path."""
    return layernorm_backward(dy, cache, gamma)


# ---------------------------------------------------------------------------------------------
# Mean over the patches (the Mixer's pooling)


def mean_tokens_forward(x: np.ndarray) -> np.ndarray:
    """y[b, c] = (1/T) Σ_t x[t, b, c]."""
    return x.mean(axis=0)


def mean_tokens_backward(dy: np.ndarray, tokens: int) -> np.ndarray:
    """∂x[t, b, c] = ∂y[b, c] / T for every patch t."""
    return np.broadcast_to(dy / dy.dtype.type(tokens), (tokens, *dy.shape))


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


def cross_entropy_forward(z: np.ndarray, labels: np.ndarray, smoothing: float = 0.0, mix=None):
    """L = mean_i Σ_j −q[i, j] log softmax(z_i)[j], q = (1 − ε) onehot(y_i) + ε / C.

    With ε = 0 (no label smoothing) this is mean_i (logsumexp(z_i) − z[i, y_i]). With mix = (y2, s)
    (CutMix: sample i's partner label and the share s_i of it, augment.mix_shares) the one-hot part
    is (1 − s_i) onehot(y_i) + s_i onehot(y2_i).
    """
    zmax = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - zmax).sum(axis=1)) + zmax[:, 0]
    rows = np.arange(len(labels))
    per_sample = lse - z[rows, labels]
    if mix is not None:
        partner, share = mix
        per_sample = (1.0 - share) * per_sample + share * (lse - z[rows, partner])
    if smoothing:  # −Σ_j q_j log p_j = (1 − ε)(lse − z_y) + ε (lse − mean_j z_j)
        per_sample = (1.0 - smoothing) * per_sample + smoothing * (lse - z.mean(axis=1))
    return per_sample.mean(), per_sample


def cross_entropy_backward(z: np.ndarray, labels: np.ndarray, smoothing: float = 0.0, mix=None) -> np.ndarray:
    """∂z = (softmax(z) − q) / B,  q = (1 − ε) onehot(y) + ε / C (onehot(y) mixed as the forward says)."""
    dz = softmax(z)
    if smoothing:
        dz -= z.dtype.type(smoothing / z.shape[1])
    rows, kept = np.arange(len(labels)), 1.0 - smoothing
    if mix is None:
        dz[rows, labels] -= kept
    else:
        partner, share = mix
        np.subtract.at(dz, (rows, labels), kept * (1.0 - share))  # .at: y2 may equal y
        np.subtract.at(dz, (rows, partner), kept * share)
    return dz / len(labels)
