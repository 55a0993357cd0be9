"""The reference tier: for each op kind, the plain kernels (kernels/reference/) that compute its forward
and its gradients — one thread per output element, no tiling, no fusion — as calls over the walk's
tensors. This is what `--kernels reference` runs, what every fast kernel is held to, and the page of
the GPU code a student reads first: each function here is the launch of one formula of litenet.ops.

`w` is the walk (walk.py): its `act(name)` is an op's output tensor (B, n) or tokens-major (T, B, n),
`param(op, kind)` / `grad(op, kind)` the views of a parameter and its gradient.
"""

from __future__ import annotations

import math

import numpy as np

from litenet.graph import Op
from litenet.lowering.program import Call

i32, f32 = np.int32, np.float32
THREADS = 256
GRID_MAX = 65535  # the kernels walk their outputs grid-stride, so a larger job still gets every element


def grid(n: int) -> int:
    """One thread per output element: ⌈n / 256⌉ blocks (at most GRID_MAX)."""
    return max(1, min(math.ceil(n / THREADS), GRID_MAX))


def rows_of(ref) -> int:
    """The rows a product over the last axis multiplies: every leading axis of the tensor."""
    return math.prod(ref.shape[:-1])


# -- forward ------------------------------------------------------------------------------------------


def pixel_rows_forward(w, op: Op) -> list[Call]:
    x, s = w.act(op.inputs[0]), w.act(op.name)
    return [Call("pixel_rows_forward_reference", grid(s.size),
                 dict(images=x, rows=s, B=i32(w.B), full=i32(op.attrs["embed"] == "full"),
                      shift=f32(op.attrs["input_shift"])), terms={"rows": 3})]


def patches_forward(w, op: Op) -> list[Call]:
    x, p = w.act(op.inputs[0]), w.act(op.name)
    return [Call("patches_forward_reference", grid(x.size),
                 dict(images=x, out=p, B=i32(w.B), patch=i32(op.attrs["patch"]), shift=f32(op.attrs["input_shift"]),
                      scale=f32(op.attrs["input_scale"])), terms={"out": 2})]


def linear_forward(w, op: Op) -> list[Call]:
    x, y, W = w.act(op.inputs[0]), w.act(op.name), w.param(op, "weight")
    bias = w.param(op, "bias") if op.param("bias") else W  # an unread placeholder without a bias
    return [Call("linear_forward_reference", grid(y.size),
                 dict(x=x, W=W, bias=bias, y=y, rows=i32(rows_of(x)), n_in=i32(W.shape[0]), n_out=i32(W.shape[1]),
                      has_bias=i32(op.param("bias") is not None)), terms={"y": W.shape[0] + 1})]


def token_linear_forward(w, op: Op) -> list[Call]:
    x, y, W = w.act(op.inputs[0]), w.act(op.name), w.param(op, "weight")
    return [Call("token_linear_forward_reference", grid(y.size),
                 dict(x=x, W=W, bias=w.param(op, "bias"), y=y, T=i32(W.shape[0]), T_out=i32(W.shape[1]),
                      N=i32(x.size // x.shape[0])), terms={"y": W.shape[0] + 1})]


def gelu_forward(w, op: Op) -> list[Call]:
    u, a = w.act(op.inputs[0]), w.act(op.name)
    return [Call("gelu_forward_reference", grid(a.size), dict(u=u, a=a, n=i32(a.size)), terms={"a": 4})]


def residual_forward(w, op: Op) -> list[Call]:
    x, branch, y = w.act(op.inputs[0]), w.act(op.inputs[1]), w.act(op.name)
    return [Call("residual_forward_reference", grid(y.size), dict(x=x, branch=branch, y=y, n=i32(y.size)))]


def layernorm_forward(w, op: Op) -> list[Call]:
    s, y = w.act(op.inputs[0]), w.act(op.name)
    rows, d = rows_of(s), s.shape[-1]
    nrm, rstd = w.cache(op, "nrm", s.shape), w.cache(op, "rstd", (rows,))
    mean = w.prog.add(w.name(op.name + ".mean"), (rows,), purpose="LayerNorm's row means, between its two launches")
    return [Call("layernorm_rows_reference", grid(rows),
                 dict(s=s, mean=mean, rstd=rstd, rows=i32(rows), d=i32(d), eps=f32(op.attrs["eps"])),
                 terms={"mean": d, "rstd": 2 * d}),
            Call("layernorm_forward_reference", grid(s.size),
                 dict(s=s, mean=mean, rstd=rstd, gamma=w.param(op, "gamma"), beta=w.param(op, "beta"), nrm=nrm, y=y,
                      rows=i32(rows), d=i32(d)), terms={"nrm": 2, "y": 3})]


def mean_tokens_forward(w, op: Op) -> list[Call]:
    x, y = w.act(op.inputs[0]), w.act(op.name)
    T = x.shape[0]
    return [Call("mean_tokens_forward_reference", grid(y.size), dict(x=x, y=y, T=i32(T), N=i32(y.size)),
                 terms={"y": T})]


FORWARD = {"pixel_rows": pixel_rows_forward, "patches": patches_forward, "linear": linear_forward,
           "token_linear": token_linear_forward, "gelu": gelu_forward, "residual": residual_forward,
           "layernorm": layernorm_forward, "mean_tokens": mean_tokens_forward}


# -- backward -------------------------------------------------------------------------------------------
# Each takes ∂ of the op's output (dy) and where each input's ∂ goes (dins: a Ref, or None where no
# gradient is wanted), writes the op's parameter gradients, and returns its calls.


def linear_backward(w, op: Op, dy, dins) -> list[Call]:
    x, W = w.act(op.inputs[0]), w.param(op, "weight")
    rows, n_in, n_out = rows_of(x), W.shape[0], W.shape[1]
    calls = [Call("linear_backward_weight_reference", grid(W.size),
                  dict(x=x, dy=dy, dW=w.grad(op, "weight"), rows=i32(rows), n_in=i32(n_in), n_out=i32(n_out)),
                  terms={"dW": rows})]
    if op.param("bias"):
        calls.append(Call("linear_backward_bias_reference", grid(n_out),
                          dict(dy=dy, db=w.grad(op, "bias"), rows=i32(rows), n_out=i32(n_out)), terms={"db": rows}))
    if dins[0] is not None:
        calls.append(Call("linear_backward_input_reference", grid(x.size),
                          dict(dy=dy, W=W, dx=dins[0], rows=i32(rows), n_in=i32(n_in), n_out=i32(n_out)),
                          terms={"dx": n_out}))
    return calls


def token_linear_backward(w, op: Op, dy, dins) -> list[Call]:
    x, W = w.act(op.inputs[0]), w.param(op, "weight")
    T, T_out, N = W.shape[0], W.shape[1], x.size // x.shape[0]
    shape = dict(T=i32(T), T_out=i32(T_out), N=i32(N))
    calls = [Call("token_linear_backward_weight_reference", grid(W.size),
                  dict(x=x, dy=dy, dW=w.grad(op, "weight"), **shape), terms={"dW": N}),
             Call("token_linear_backward_bias_reference", grid(T_out),
                  dict(dy=dy, db=w.grad(op, "bias"), T_out=i32(T_out), N=i32(N)), terms={"db": N})]
    if dins[0] is not None:
        calls.append(Call("token_linear_backward_input_reference", grid(x.size),
                          dict(dy=dy, W=W, dx=dins[0], **shape), terms={"dx": T_out}))
    return calls


def gelu_backward(w, op: Op, dy, dins) -> list[Call]:
    u = w.act(op.inputs[0])
    return [Call("gelu_backward_reference", grid(u.size), dict(da=dy, u=u, du=dins[0], n=i32(u.size)),
                 terms={"du": 8})]


def layernorm_backward(w, op: Op, dy, dins) -> list[Call]:
    s = w.act(op.inputs[0])
    rows, d = rows_of(s), s.shape[-1]
    nrm, rstd, gamma = w.cache(op, "nrm", s.shape), w.cache(op, "rstd", (rows,)), w.param(op, "gamma")
    means = w.prog.add(w.name(op.name + ".dmeans"), (rows, 2), purpose="LayerNorm backward's mean(∂n), mean(∂n·n)")
    return [Call("layernorm_backward_rows_reference", grid(rows),
                 dict(dy=dy, nrm=nrm, gamma=gamma, means=means, rows=i32(rows), d=i32(d)), terms={"means": d}),
            Call("layernorm_backward_input_reference", grid(s.size),
                 dict(dy=dy, nrm=nrm, rstd=rstd, gamma=gamma, means=means, ds=dins[0], rows=i32(rows), d=i32(d)),
                 terms={"ds": 2 * d}),
            Call("layernorm_backward_params_reference", grid(d),
                 dict(dy=dy, nrm=nrm, dgamma=w.grad(op, "gamma"), dbeta=w.grad(op, "beta"), rows=i32(rows), d=i32(d)),
                 terms={"dgamma": rows, "dbeta": rows})]


def mean_tokens_backward(w, op: Op, dy, dins) -> list[Call]:
    x = w.act(op.inputs[0])
    return [Call("mean_tokens_backward_reference", grid(x.size),
                 dict(dy=dy, dx=dins[0], T=i32(x.shape[0]), N=i32(dy.size)))]


def pixel_rows_backward(w, op: Op, dy, dins) -> list[Call]:
    return [Call("pixel_rows_backward_reference", grid(dins[0].size),
                 dict(drows=dy, dimages=dins[0], B=i32(w.B), full=i32(op.attrs["embed"] == "full")))]


def patches_backward(w, op: Op, dy, dins) -> list[Call]:
    return [Call("patches_backward_reference", grid(dins[0].size),
                 dict(dpatches=dy, dimages=dins[0], B=i32(w.B), patch=i32(op.attrs["patch"]),
                      scale=f32(op.attrs["input_scale"])))]


# The residual's backward has no kernel: ∂y reaches both summands unchanged (walk.py passes it on).
BACKWARD = {"linear": linear_backward, "token_linear": token_linear_backward, "gelu": gelu_backward,
            "layernorm": layernorm_backward, "mean_tokens": mean_tokens_backward,
            "pixel_rows": pixel_rows_backward, "patches": patches_backward}


def gradient_sum(a, b, out) -> Call:
    """∂x = ∂a + ∂b: two ops read x, and each sends its part of ∂x back."""
    return Call("gradient_sum_reference", grid(out.size), dict(a=a, b=b, out=out, n=i32(out.size)), terms={"out": 2})
