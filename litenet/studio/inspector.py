"""What the page shows of a training step: every edge's forward and backward norm, the residual paths'
shares, each op's parameter-gradient norm, and the tensors of the op the user selected.

An Inspector is NumpyBackend.step's observer: it reads the step's own arrays (no copies, no second pass)
and only on the steps the page will see (`wanted`), so inspection costs a step little (bench/bench_studio.py).
"""

from __future__ import annotations

import numpy as np

from litenet.forward import Tape
from litenet.graph import IMAGES, Op
from litenet.model import param_views
from litenet.studio.summaries import matrix_picture, per_image_norm, summary


def identity_shares(sums: tuple[float, float, float]) -> dict:
    """The identity path's share of ∂L/∂x at a residual join, from (‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩)
    (network.path_sums, what training logs): by projection onto the sum, and by norm (docs/insight.md)."""
    s, m, c = sums
    total = s + m + 2 * c
    by_norm = np.sqrt(s) / (np.sqrt(s) + np.sqrt(m)) if s + m > 0 else 0.0
    return {"projection": float((s + c) / total) if total > 0 else 0.0, "norm": float(by_norm)}


class Inspector:
    """Gathers one step's summaries when `wanted`; `last` holds the latest (None before the first)."""

    def __init__(self, model):
        self.model = model
        self.wanted = False
        self.selected: str | None = None  # the op whose tensors are summarised as well
        self.batch = 1
        self.params: np.ndarray | None = None  # the weights the step reads (the session points this at them)
        self.last: dict | None = None
        self._back: dict[tuple[str, str], float] = {}
        self._selected_grads: dict = {}

    # -- NumpyBackend.step's observer ---------------------------------------------------------------

    def backward_op(self, op: Op, dy, dins, dparams, join) -> None:
        """network.backward's on_op hook: the ∂ each edge carries back, and the paths meeting at a join."""
        if not self.wanted:
            return
        for name, d in zip(op.inputs, dins):
            if d is not None:
                self._back[(name, op.name)] = per_image_norm(d, self.batch)
        if op.name == self.selected:
            self._selected_grads = {"output": dy, **{f"param.{k}": v for k, v in dparams.items()},
                                    **{f"input.{i}": d for i, d in enumerate(dins) if d is not None}}

    def pass_done(self, tape: Tape, dz, grads: np.ndarray) -> None:
        """After the backward, before the update: turn what was gathered into `last`."""
        if not self.wanted:
            return
        forward_norms = {name: per_image_norm(value, self.batch) for name, value in tape.values.items()}
        edges = []
        for op in tape.ops:
            for i, name in enumerate(op.inputs):
                edges.append({"from": name, "to": op.name, "forward": forward_norms.get(name),
                              "backward": self._back.get((name, op.name)), "identity": op.kind == "residual" and i == 0})
        out = tape.ops[-1].name
        edges.append({"from": out, "to": "loss", "forward": forward_norms[out],
                      "backward": per_image_norm(dz, self.batch), "identity": False})
        g = param_views(grads, self.model)
        nodes = {op.name: {"grad_norm": float(np.sqrt(sum(float(np.vdot(g[p.name], g[p.name])) for p in op.params)))}
                 for op in tape.ops if op.params}
        self.last = {"edges": edges, "nodes": nodes,
                     "selected": self._selected(tape) if self.selected else None}
        self.wanted, self._back, self._selected_grads = False, {}, {}

    def set_shares(self, path) -> None:
        """Label each residual's identity edge of `last` with its path's share of the gradient, from the step's
        (‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩) per residual in graph order: the sums training logs (stats["path"])."""
        identity = [edge for edge in self.last["edges"] if edge["identity"]]
        for edge, sums in zip(identity, path):
            edge["shares"] = identity_shares(tuple(float(v) for v in sums))

    # -- the selected op -------------------------------------------------------------------------------

    def _selected(self, tape: Tape) -> dict | None:
        """The selected op's tensors as summaries: output and its ∂, inputs and theirs, parameters and theirs."""
        op = next((o for o in tape.ops if o.name == self.selected), None)
        if op is None or op.name not in tape.values:
            return None
        grads = self._selected_grads
        out = {"op": op.name, "output": summary(tape.values[op.name]),
               "output_grad": summary(grads["output"]) if "output" in grads else None,
               "inputs": [{"name": name, "value": summary(tape.values[name]) if name in tape.values else None,
                           "grad": summary(grads[f"input.{i}"]) if f"input.{i}" in grads else None}
                          for i, name in enumerate(op.inputs) if name != IMAGES or name in tape.values],
               "params": []}
        views = param_views(self.params, self.model) if self.params is not None else {}
        for p in op.params:
            value, grad = views.get(p.name), grads.get(f"param.{p.kind}")
            entry = {"name": p.name, "kind": p.kind, "value": summary(value) if value is not None else None,
                     "grad": summary(grad) if grad is not None else None}
            if p.kind == "weight" and value is not None:
                entry["picture"] = matrix_picture(value)
                if grad is not None:
                    entry["grad_picture"] = matrix_picture(grad)
            out["params"].append(entry)
        return out
