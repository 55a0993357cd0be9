"""Evaluation over a split kept on the GPU: the trainer's test images and its training-accuracy prefix.

`over_split` wraps a forward program (lower_forward) in three launches: the first takes the split's next
batch into the forward's input, the last two put its logits in place and advance the split's counter
(kernels/eval_batches.cu). One run of the whole list scores one batch, so a CUDA graph of it, replayed
⌈n / B⌉ times between one upload of the split and one download of its logits, evaluates a split with no
host round trip per batch. The forward program itself is unchanged: its calls and tensors are the ones
`litenet-infer` and the checks know.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from litenet.graph import IMAGES, ops_of
from litenet.lowering.program import Call, Program, Region
from litenet.lowering.reference import grid

SPLIT_IMAGES, SPLIT_LOGITS, SPLIT_COUNTER = "split.images", "split.logits", "split.ctr"


def over_split(forward: Program, model, batch: int, prefix: str = "eval/") -> Program:
    """`forward` (a pass over `batch` images in `prefix + "images"`) as one batch of a split: the split's
    images and logits are external tensors the backend supplies (`prefix` + SPLIT_IMAGES, SPLIT_LOGITS);
    `prefix` + SPLIT_COUNTER holds (the batch now in the pass, the split's image count)."""
    last = ops_of(model)[-1]
    tensors = dict(forward.tensors)
    program = dataclasses.replace(forward, tensors=tensors, regions=[])
    split = program.add(prefix + SPLIT_IMAGES, (1, 32, 32, 3), np.uint8, life="external",
                        purpose="the split being evaluated, uploaded once")
    out = program.add(prefix + SPLIT_LOGITS, (1, last.shape[-1]), np.float32, life="external",
                      purpose="the split's logits, downloaded once")
    ctr = program.add(prefix + SPLIT_COUNTER, (2,), np.int32, life="state",
                      purpose="(the split's batch now in the forward pass, the split's image count)")
    images = program.ref(prefix + IMAGES)
    logits = program.ref(forward.outputs.get(last.name, prefix + last.name))
    B, C = np.int32(batch), np.int32(last.shape[-1])
    take = Call("split_batch_take", grid(batch * 3072), dict(split=split, ctr=ctr, images=images, B=B))
    put = Call("split_logits_put", grid(batch * last.shape[-1]), dict(logits=logits, ctr=ctr, out=out, B=B, C=C))
    advance = Call("step_advance_reference", 1, dict(ctr=ctr))
    program.regions = [Region("split → images", "input", (), [take], [take]), *forward.regions,
                       Region("logits → split", "output", (), [put, advance], [put, advance])]
    return program
