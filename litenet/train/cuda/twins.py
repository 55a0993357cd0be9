"""For every launch of a training step, the `Check` that holds it to its NumPy twin: which
buffers feed litenet.train.reference, which buffers the kernel writes, and how many rounded
terms stand behind each output (its tolerance, see check.py). Used by `check_kernels`."""

from __future__ import annotations

import numpy as np

from litenet.model import ModelConfig, TrainConfig, param_layout, param_views
from litenet import ops
from litenet.train import reference as ref
from litenet.train.cuda.check import EXACT, Check
from litenet.train.cuda.layout import StatsLayout


class Twins:
    def __init__(self, model: ModelConfig, train: TrainConfig, v: dict, host):
        self.m, self.t, self.v, self.host = model, train, v, host
        self.pv = param_views(v["params"], model)
        self.gv = param_views(v["grads"], model)
        self.st = StatsLayout.of(model)
        self.B = v["X"].shape[1]

    # -- inputs every batch-dependent twin needs -----------------------------------------------------

    def _batch(self) -> dict:
        return {"batch": lambda pos: self.v["batches"][pos], "flip": lambda pos: self.v["flips"][pos]}

    def _images(self, inp) -> np.ndarray:
        images = np.asarray(self.host.images[inp["batch"]])
        return np.where(inp["flip"].astype(bool)[:, None, None, None], images[:, :, ::-1], images)

    def _labels(self, inp) -> np.ndarray:
        return np.asarray(self.host.labels)[inp["batch"]].astype(np.int64)

    def _row(self, slot: int, n: int = 1):
        return lambda pos: self.v["stats"][pos, slot:slot + n]

    def _params(self, inp) -> dict:
        return param_views(inp["params"], self.m)

    # -- one builder per kernel ----------------------------------------------------------------------

    def _inputs(self, inp) -> np.ndarray:
        """s(x) of the batch in float64 (what embed_inputs / embed_forward_rows write to S)."""
        return ops.embed_inputs(ops.pixels_to_float(self._images(inp), np.float64), self.m.embed, self.m.input_shift)

    def embed_inputs(self) -> Check:
        # S sums at most 3 rounded values (a colour sum), each a rounded x/255 − shift
        return Check(self._batch(), {"S": self.v["S"]}, lambda i, pos: {"S": self._inputs(i)}, {"S": 3})

    def embed_forward(self, out) -> Check:
        m = self.m
        return Check({"W": self.pv["embed.weight"], **self._batch()}, {"h0": out},
                     lambda i, pos: {"h0": ops.embed_forward(self._images(i), i["W"], m.embed, m.input_shift)},
                     {"h0": 3 * m.embed_inputs})

    def embed_forward_rows(self, out) -> Check:
        m = self.m
        def twin(i, pos):
            return {"h0": ops.embed_forward(self._images(i), i["W"], m.embed, m.input_shift), "S": self._inputs(i)}
        return Check({"W": self.pv["embed.weight"], **self._batch()}, {"h0": out, "S": self.v["S"]}, twin,
                     {"h0": 3 * m.embed_inputs, "S": 3})

    def embed_backward(self) -> Check:
        m = self.m
        return Check({"dh0": self.v["G1"], "W": self.pv["embed.weight"], **self._batch()},
                     {"embed.weight": self.gv["embed.weight"]},
                     lambda i, pos: {"embed.weight": ops.embed_backward(i["dh0"], self._images(i), i["W"], m.embed,
                                                                        m.input_shift)[0]},
                     {"embed.weight": 3 * self.B})

    def linear_forward(self, kernel: str, x, w: str, b: str, outs) -> Check:
        layer = w.rsplit(".", 1)[0]
        reads = {"x": x, "W": self.pv[w], "b": self.pv[b]}
        n_in = self.pv[w].shape[0]
        if kernel == "linear_gelu_forward":  # outs: u, a and, from the wide BF16 kernel, a's BF16 copy
            def twin(i, pos):
                u, a = ref.linear_gelu_forward(i["x"], i["W"], i["b"])
                return {f"{layer} u": u, f"{layer} a": a}
            check = Check(reads, {f"{layer} u": outs[0], f"{layer} a": outs[1]}, twin,
                          {f"{layer} u": n_in, f"{layer} a": n_in})
            return check.with_copy(f"{layer} a", outs[2], n_in) if len(outs) == 3 else check
        return Check(reads, {f"{layer} y": outs[0]},
                     lambda i, pos: {f"{layer} y": ops.linear_forward(i["x"], i["W"], i["b"])}, {f"{layer} y": n_in})

    def linear_backward_weight(self, x, dy, w: str, b: str) -> Check:
        def twin(i, pos):
            _, dW, db = ops.linear_backward(i["dy"], i["x"], None, want_dx=False)
            return {w: dW, b: db}
        return Check({"x": x, "dy": dy}, {w: self.gv[w], b: self.gv[b]}, twin, {w: self.B, b: self.B})

    def linear_backward_input(self, dy, w: str, dx, u=None, dx16=None) -> Check:
        """∂x = ∂y Wᵀ; with `u` (linear_backward_input_gelu_wide_bf16), times GELU'(u), and its BF16 copy."""
        name = f"∂input of {w.rsplit('.', 1)[0]}" + (" through GELU" if u is not None else "")
        n_out = self.pv[w].shape[1]
        def twin(i, pos):
            x = np.zeros((len(i["dy"]), i["W"].shape[0]))  # linear_backward wants x for ∂W; only ∂x is used
            dx = ops.linear_backward(i["dy"], x, i["W"])[0]
            return {name: dx if u is None else ops.gelu_backward(dx, i["u"])}
        reads = {"dy": dy, "W": self.pv[w], **({} if u is None else {"u": u})}
        check = Check(reads, {name: dx}, twin, {name: n_out})
        return check if dx16 is None else check.with_copy(name, dx16, n_out)

    def residual_layernorm_forward(self, blk: int) -> Check:
        v, p, d = self.v, f"blocks.{blk}.", self.m.width
        def twin(i, pos):
            y, (n, rstd) = ops.residual_layernorm_forward(i["x"], i["v"], i["gamma"], i["beta"], self.m.ln_eps)
            return {f"{p}ln y": y, f"{p}ln n": n, f"{p}ln rstd": rstd[:, 0]}
        return Check({"x": v["X"][blk], "v": v["V"], "gamma": self.pv[p + "ln.gamma"], "beta": self.pv[p + "ln.beta"]},
                     {f"{p}ln y": v["X"][blk + 1], f"{p}ln n": v["NRM"][blk], f"{p}ln rstd": v["RSTD"][blk]}, twin,
                     {f"{p}ln y": d, f"{p}ln n": d, f"{p}ln rstd": d})

    def residual_layernorm_backward(self, blk: int) -> Check:
        v, p = self.v, f"blocks.{blk}."
        def twin(i, pos):
            ds, dg, db = ops.residual_layernorm_backward(i["dy"], (i["n"], i["rstd"][:, None]), i["gamma"])
            return {f"{p}∂s": ds, p + "ln.gamma": dg, p + "ln.beta": db}
        return Check({"dy": v["G1"], "n": v["NRM"][blk], "rstd": v["RSTD"][blk], "gamma": self.pv[p + "ln.gamma"]},
                     {f"{p}∂s": v["G2"], p + "ln.gamma": self.gv[p + "ln.gamma"], p + "ln.beta": self.gv[p + "ln.beta"]},
                     twin, {f"{p}∂s": self.m.width, p + "ln.gamma": self.B, p + "ln.beta": self.B})

    def gelu_backward(self, blk: int) -> Check:
        name = f"blocks.{blk} ∂u"
        return Check({"da": self.v["GH"], "u": self.v["U"][blk]}, {name: self.v["GH"]},
                     lambda i, pos: {name: ops.gelu_backward(i["da"], i["u"])})

    def residual_join(self, blk: int) -> Check:
        slot = self.st.path + 3 * blk
        name = f"blocks.{blk} ∂x"
        def twin(i, pos):
            dx, sums = ref.residual_join(i["ds"], i["dx_main"])
            return {name: dx, "path sums": i["before"] + np.array(sums)}
        return Check({"ds": self.v["G2"], "dx_main": self.v["G3"], "before": self._row(slot, 3)},
                     {name: self.v["G1"], "path sums": self._row(slot, 3)}, twin, {"path sums": self.B * self.m.width})

    def loss_forward(self, kind: str) -> Check:
        def twin(i, pos):
            if kind == "margin_loss":
                value, per = ops.margin_loss_forward(i["z"], self._labels(i), self.t.margin)
            else:
                value, per = ops.cross_entropy_forward(i["z"], self._labels(i))
            return {"per-image loss": per, "loss": i["before"] + value}
        return Check({"z": self.v["Z"], "before": self._row(self.st.loss), **self._batch()},
                     {"per-image loss": self.v["PS"], "loss": self._row(self.st.loss)}, twin,
                     {"per-image loss": self.m.classes, "loss": self.B})

    def loss_backward(self, kind: str) -> Check:
        def twin(i, pos):
            if kind == "margin_loss":
                return {"∂z": ops.margin_loss_backward(i["z"], self._labels(i), self.t.margin)}
            return {"∂z": ops.cross_entropy_backward(i["z"], self._labels(i))}
        return Check({"z": self.v["Z"], **self._batch()}, {"∂z": self.v["DZ"]}, twin, {"∂z": self.m.classes})

    def bf16_copy(self, src, dst) -> Check:
        """The BF16 copy of a product's operand: bit for bit."""
        def twin(i, pos):
            return {"BF16 copy": ref.bf16_values(ref.bf16_copy(i["x"]))}
        return Check({"x": src}, {"BF16 copy": dst}, twin, tol=EXACT)

    def grad_norm_sq(self) -> Check:
        T, largest = self.st.tensors, max(p.size for p in param_layout(self.m))
        def twin(i, pos):
            g = self._params({"params": i["grads"]})
            return {"grad_sq": i["before"] + np.array([float(np.vdot(x, x)) for x in g.values()])}
        return Check({"grads": self.v["grads"], "before": self._row(self.st.grad_sq, T)},
                     {"grad_sq": self._row(self.st.grad_sq, T)}, twin, {"grad_sq": largest})

    def grad_average(self, world_size: int) -> Check:
        T = self.st.tensors
        def twin(i, pos):
            g = i["grads"].copy()
            ref.grad_average(g, world_size)
            return {"grads": g, "grad_sq": np.zeros(T)}
        return Check({"grads": self.v["grads"]}, {"grads": self.v["grads"], "grad_sq": self._row(self.st.grad_sq, T)},
                     twin)

    def grad_norm_clip(self) -> Check:
        t, P = self.t, self.v["grads"].size
        def twin(i, pos):
            g = i["grads"].copy()
            norm, clipped = ref.grad_norm_clip(g, t.clip_threshold, t.clip_norm)
            return {"grads": g, "norm, clipped": np.array([norm, float(clipped)])}
        return Check({"grads": self.v["grads"]}, {"grads": self.v["grads"], "norm, clipped": self._row(self.st.grad_norm, 2)},
                     twin, {"grads": P, "norm, clipped": P})

    def sgd_momentum_update(self) -> Check:
        t = self.t
        def twin(i, pos):
            p, vel = i["params"].copy(), i["velocity"].copy()
            ref.sgd_momentum_update(p, vel, i["grads"], float(i["lr"][0]), t.momentum, t.weight_decay)
            return {"params": p, "velocity": vel}
        return Check({"params": self.v["params"], "velocity": self.v["velocity"], "grads": self.v["grads"],
                      "lr": lambda pos: self.v["lrs"][pos:pos + 1]},
                     {"params": self.v["params"], "velocity": self.v["velocity"]}, twin, {"params": 4, "velocity": 4})

    def sgd_clip_update(self) -> Check:
        t, P = self.t, self.v["params"].size
        def twin(i, pos):
            p, vel, g = i["params"].copy(), i["velocity"].copy(), i["grads"].copy()
            norm, clipped = ref.sgd_clip_update(p, vel, g, float(i["lr"][0]), t.momentum, t.weight_decay,
                                                t.clip_threshold, t.clip_norm)
            return {"params": p, "velocity": vel, "norm, clipped": np.array([norm, float(clipped)])}
        return Check({"params": self.v["params"], "velocity": self.v["velocity"], "grads": self.v["grads"],
                      "lr": lambda pos: self.v["lrs"][pos:pos + 1]},
                     {"params": self.v["params"], "velocity": self.v["velocity"],
                      "norm, clipped": self._row(self.st.grad_norm, 2)}, twin,
                     {"params": P, "velocity": P, "norm, clipped": P})

    def fused_rows(self) -> Check:
        v, m, L, st = self.v, self.m, self.m.blocks, self.st
        names = ("X", "U", "A", "NRM", "RSTD", "DY", "DS", "Z", "DH0")
        def twin(i, pos):
            out = ref.fused_rows(i["params"], i["h0"], self._labels(i), m, self.t.loss, self.t.margin)
            want = {k: out[k] for k in names}
            want["loss"] = i["loss before"] + out["loss"]
            want["path sums"] = i["path before"] + out["path"].ravel()
            return want
        chain = 4 * L * (m.width + m.hidden) + m.classes
        return Check({"params": v["params"], "h0": v["X"][0], "loss before": self._row(st.loss),
                      "path before": self._row(st.path, 3 * L), **self._batch()},
                     {**{k: v[k] for k in names}, "loss": self._row(st.loss), "path sums": self._row(st.path, 3 * L)},
                     twin, {k: chain for k in (*names, "loss", "path sums")})

    def fused_weight_grads(self) -> Check:
        v, m, L, st = self.v, self.m, self.m.blocks, self.st
        saved = ("X", "A", "U", "DS", "DY", "NRM", "RSTD", "Z", "DH0")
        names = [p.name for p in param_layout(m)]
        def twin(i, pos):
            g = ref.fused_weight_grads(i, self._images(i), self._params(i), L, m.embed, m.input_shift)
            want = {k: g[k] for k in names}
            want["grad_sq"] = i["before"] + np.array([float(np.vdot(g[k], g[k])) for k in names])
            return want
        terms = {k: self.B for k in names}
        terms["embed.weight"] = 3 * self.B
        terms["grad_sq"] = max(p.size for p in param_layout(m))
        return Check({**{k: v[k] for k in saved}, "params": v["params"], "before": self._row(st.grad_sq, st.tensors),
                      **self._batch()},
                     {**{k: self.gv[k] for k in names}, "grad_sq": self._row(st.grad_sq, st.tensors)}, twin, terms)
