"""Rewrites of a step's end: the loss, ‖g‖² and the update (kernels/loss.cu, grad_norm.cu, sgd.cu, adamw.cu).

  loss    covers margin and cross-entropy: kernels that read the batch's labels from the training set
          through the schedule (no gathered copy), write the loss to the statistics row and ∂L/∂z.
          Cross-entropy with label smoothing or CutMix takes cross_entropy_smoothed (forward and
          backward in one launch); without either, networks of vectors keep the plain pair
          (cross_entropy_forward / _backward), the kernels their presets were measured with.
  norm    ‖g‖² of every parameter tensor, added into the row by blocks of 4,096 values.
  update  clip + SGD with momentum in one launch (sgd_clip_update) — it takes one weight decay for
          all parameters, so decay = "weights" keeps the reference update — and clip + AdamW
          (adamw_update, any decay). Both advance the step counter.
"""

from __future__ import annotations

import math

import numpy as np

from litenet.lowering.fast.common import replaced
from litenet.lowering.fast.mlp_shape import bf16_copy, params_copy
from litenet.lowering.program import Call

i32, f32 = np.int32, np.float32


def _stats(net) -> dict:
    p = net.prog
    return dict(ctr=p.ref("ctr"), stats=p.ref("stats"), stat_width=i32(net.w.stats.width))


def loss(net, regions, i):
    if regions[i].name != "labels" or i + 1 >= len(regions) or regions[i + 1].phase != "loss":
        return None

    t, p, last = net.train, net.prog, net.ops[-1]
    z, dz, B, C = net.w.act(last.name), net.w.dact(last.name), net.B, last.shape[-1]
    batch = dict(labels=p.ref("dataset.labels"), batches=p.ref("batches"), ctr=p.ref("ctr"))
    grid, shape = math.ceil(B / 256), dict(B=i32(B), C=i32(C))
    if t.loss == "margin":
        per_sample = p.ref("loss.per_sample")
        calls = [Call("margin_loss_forward", grid, dict(z=z, **batch, per_sample=per_sample, stats=p.ref("stats"),
                                                        stat_width=i32(net.w.stats.width), **shape, margin=f32(t.margin))),
                 Call("margin_loss_backward", grid, dict(z=z, **batch, dz=dz, **shape, margin=f32(t.margin)))]
        kind = "margin"
    elif not net.tokens and not t.label_smoothing and "cutmix" not in t.augmentations:
        per_sample = p.ref("loss.per_sample")
        calls = [Call("cross_entropy_forward", grid, dict(z=z, **batch, per_sample=per_sample, stats=p.ref("stats"),
                                                          stat_width=i32(net.w.stats.width), **shape)),
                 Call("cross_entropy_backward", grid, dict(z=z, **batch, dz=dz, **shape))]
        kind = "cross-entropy"
    else:
        calls = [Call("cross_entropy_smoothed", grid, dict(z=z, **batch, mixes=p.ref("mixes"), dz=dz,
                                                           stats=p.ref("stats"), stat_width=i32(net.w.stats.width),
                                                           **shape, eps=f32(t.label_smoothing),
                                                           mix=i32("cutmix" in t.augmentations)))]
        kind = "cross-entropy, smoothed"
    return 2, [replaced(f"loss: {kind}", regions[i:i + 2], calls)]


def norm(net, regions, i):
    if regions[i].phase != "norm":
        return None

    p = net.prog
    call = Call("grad_norm_sq", math.ceil(net.w.P / 4096),
                dict(grads=p.ref("grads"), offsets=p.ref("layout"), T=i32(len(net.w.layout)), **_stats(net)))
    return 1, [replaced("‖g‖² in blocks of 4,096", regions[i:i + 1], [call])]


def update(net, regions, i):
    if regions[i].phase != "update":
        return None

    t, p, P, T = net.train, net.prog, net.w.P, len(net.w.layout)
    clip = dict(threshold=f32(t.clip_threshold), clip_norm=f32(t.clip_norm))
    if t.optimizer == "sgd":
        if t.decay != "all":
            return None  # sgd_clip_update takes one weight decay for every parameter
        copy = params_copy(net)
        call = Call("sgd_clip_update", max(1, min(math.ceil(P / 1024), 4 * net.sm_count)),
                    dict(params=p.ref("params"), velocity=p.ref("velocity"), grads=p.ref("grads"), n=i32(P), T=i32(T),
                         lrs=p.ref("lrs"), **_stats(net), **clip, momentum=f32(t.momentum),
                         weight_decay=f32(t.weight_decay), params16=copy if copy is not None else net.w.state(
                             "params.bf16.none", (1,), np.uint16, "sgd_clip_update's params16 when nothing reads it"),
                         n16=i32(P if copy is not None else 0)))
        return 1, [replaced("clip + SGD in one launch", regions[i:i + 1], [call])]
    call = Call("adamw_update", max(1, min(math.ceil(P / 256), 8 * net.sm_count)),
                dict(params=p.ref("params"), m=p.ref("m"), v=p.ref("v"), grads=p.ref("grads"), decay=p.ref("decay"),
                     lrs=p.ref("lrs"), steps=p.ref("steps"), **_stats(net), n=i32(P), T=i32(T), beta1=f32(t.beta1),
                     beta2=f32(t.beta2), eps=f32(t.adam_eps), **clip))
    calls = [call]
    copy = params_copy(net)
    if copy is not None:  # adamw_update keeps no BF16 copy of the parameters: remake it
        calls.append(bf16_copy(net, p.ref("params"), copy))
    return 1, [replaced("clip + AdamW in one launch", regions[i:i + 1], calls)]


RULES = [loss, norm, update]
