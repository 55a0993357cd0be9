"""A training step that is not finite: undone, and located on the op where the NaN or Inf first appeared.

The check after every step is three numbers (the loss, the gradient norm, a float64 sum of the new weights);
only a step that fails it is re-run, from the weights before it, op by op, to find the first tensor that
is not finite: forward in graph order, then the loss, then backward in reverse order, else the update.
"""

from __future__ import annotations

import numpy as np

from litenet import forward as fwd
from litenet.model import param_layout, param_views
from litenet.train import network

HINT = "training is paused and the weights are those before this step; lower the learning rate or Reset"


def _finite(*arrays) -> bool:
    return all(np.isfinite(np.sum(np.asarray(a), dtype=np.float64)) for a in arrays if a is not None)


def check_step(live, stats: dict, before: dict) -> dict | None:
    """None when the step was finite; otherwise restore `before` (backend.state() taken before the step) and
    return the alarm the page shows: {"step", "op", "stage", "message"}."""
    params = live.params()
    if np.isfinite(stats["loss"]) and np.isfinite(stats["grad_norm"]) and _finite(params):
        return None
    broken = None
    if np.isfinite(stats["loss"]) and np.isfinite(stats["grad_norm"]):  # the update itself overflowed
        views = param_views(params, live.model)
        broken = next((p.name for p in param_layout(live.model) if not _finite(views[p.name])), None)
    live.backend.load_state(before)
    step = live.steps + 1
    if broken is not None:
        op = broken.rsplit(".", 1)[0]
        return {"step": step, "op": op, "stage": "update",
                "message": f"step {step}: the update made {broken} not finite; {HINT}"}
    stage, op = locate(live)
    what = {"forward": f"the forward output of {op}", "loss": "the loss",
            "backward": f"the gradient that {op} passes back"}[stage]
    return {"step": step, "op": op, "stage": stage, "message": f"step {step}: {what} is the first value that is "
                                                               f"not finite; {HINT}"}


def locate(live) -> tuple[str, str | None]:
    """(stage, op) of the first tensor that is not finite when the last batch re-runs from the current weights."""
    images, labels, mix = live.last_batch
    params = live.params()
    views = param_views(params, live.model)
    first: list[str] = []

    def forward_hook(op, inputs, out):
        if not first and not _finite(out):
            first.append(op.name)

    tape = fwd.run(live.ops, views, images, dtype=params.dtype.type, keep=True, on_op=forward_hook)
    if first:
        return "forward", first[0]
    t = live.train
    loss, _, dz = network.loss_and_dlogits(tape.z, labels, t.loss, t.margin, t.label_smoothing, mix)
    if not np.isfinite(loss) or not _finite(dz):
        return "loss", live.ops[-1].name

    def backward_hook(op, dy, dins, dparams, join):
        if not first and not _finite(*dins, *dparams.values()):
            first.append(op.name)

    network.backward(params, tape, dz, live.model, on_op=backward_hook)
    return ("backward", first[0]) if first else ("update", None)
