"""One image stepped forward, then backward, op by op: what `litenet trace` prints, as steps the page plays
on the graph. The walk is training's own pass (litenet.forward.run and network.backward with their hooks)."""

from __future__ import annotations

import numpy as np

from litenet import forward as fwd
from litenet.errors import LiteNetError
from litenet.insight.trace import BACKWARD, FORWARD
from litenet.model import param_views
from litenet.train import network

SHOWN = 6  # leading values shown per tensor


def small(x) -> dict:
    """A tensor of one image in a few numbers: shape, norm, mean, min, max and its leading values."""
    a = np.asarray(x, np.float64)
    flat = a.reshape(-1)
    return {"shape": list(a.shape), "norm": float(np.linalg.norm(flat)), "mean": float(flat.mean()),
            "min": float(flat.min()), "max": float(flat.max()), "values": flat[:SHOWN].tolist()}


def walk(live, index: int) -> dict:
    """Test image `index` through the current weights: one step per op forward, the loss, one per op backward."""
    if not 0 <= index < len(live.data.test_images):
        raise LiteNetError(f"test image {index} does not exist (0 … {len(live.data.test_images) - 1})")
    images = np.asarray(live.data.test_images[index:index + 1])
    labels = np.asarray(live.data.test_labels[index:index + 1], np.int64)
    params = live.params()
    steps: list[dict] = []

    def forward_step(op, inputs, out):
        what, formula, function = FORWARD[op.kind]
        steps.append({"dir": "forward", "op": op.name, "what": what, "function": function,
                      "formula": formula(op) if callable(formula) else formula, "out": small(out)})

    tape = fwd.run(live.ops, param_views(params, live.model), images, dtype=params.dtype.type, keep=True,
                   on_op=forward_step)
    t = live.train
    loss, _, dz = network.loss_and_dlogits(tape.z, labels, t.loss, t.margin, t.label_smoothing)
    steps.append({"dir": "loss", "op": "loss", "what": t.loss, "function": "network.loss_and_dlogits",
                  "formula": "L and ∂L/∂z of the logits", "loss": float(loss), "out": small(dz)})

    def backward_step(op, dy, dins, dparams, join):
        formula, function = BACKWARD[op.kind]
        step = {"dir": "backward", "op": op.name, "function": function, "formula": formula, "out": small(dy),
                "params": {kind: small(d) for kind, d in dparams.items()}}
        if join is not None:
            s, m, c = network.path_sums(join)
            step["join"] = {"identity": float(np.sqrt(s)), "branch": float(np.sqrt(m))}
        steps.append(step)

    network.backward(params, tape, dz, live.model, on_op=backward_step)
    probs = np.exp(tape.z[0] - tape.z[0].max())
    return {"index": index, "label": live.data.classes[int(labels[0])],
            "predicted": live.data.classes[int(np.argmax(tape.z[0]))],
            "confidence": float(probs.max() / probs.sum()), "steps": steps}
