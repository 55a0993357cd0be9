"""The backward's weight gradients on a second stream.

A ∂W launch writes only its slice of the gradient (and its split-K partials; or, where a second launch
sums them, only the partials), which nothing reads until ‖g‖² and the update: it need not hold up the
∂input launches that carry the gradient down to the next layer. `side_branch` marks those calls for the
second stream of a captured graph — the waits between the streams come from the bytes each launch touches
(litenet/gpu/streams.py) — and gives them split-K scratch and counters of their own, since two products
running at once cannot share them. The sums are the same: each kernel computes what it did, only the order
in which independent launches start changes.
"""

from __future__ import annotations

import dataclasses

from litenet.lowering.program import Program, Ref

BRANCHES = ("on", "off")


def side_branch(program: Program) -> Program:
    """The program with every backward call that writes only gradients and split-K scratch on stream 1."""
    split_k = {"scratch", "counters"}
    if not split_k <= program.tensors.keys():
        return program
    own = {name: program.add(f"side.{name}", program.tensors[name].shape, program.tensors[name].dtype, life="state",
                             purpose=f"split-K {name} of the calls on the second stream")
           for name in split_k}
    moved = 0
    for region in program.regions:
        if region.phase != "backward":
            continue
        for call in region.calls:
            written = {call.args[name].tensor for name in call.writes()}
            if written & {"grads", "scratch"} and written <= {"grads"} | split_k:  # scratch alone: ∂W partials
                call.stream = 1
                call.args = {k: _moved(v, own) for k, v in call.args.items()}
                moved += 1
    if not moved:
        for name in own:
            del program.tensors[f"side.{name}"]
    program.labels["second stream"] = moved
    return program


def _moved(value, own: dict):
    if isinstance(value, Ref) and value.tensor in own:
        return dataclasses.replace(value, tensor=own[value.tensor].tensor)
    return value
