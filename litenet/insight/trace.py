"""`litenet trace`: one tiny batch through the network, every forward and backward step printed.

The trace calls the same `litenet.train.reference` functions as training does (no copies), in the
order `network.forward` and `network.backward` call them, so under a debugger (`--pdb`, then `s`
on a line) a student steps straight into the code that trains the model.
"""

from __future__ import annotations

import sys

import numpy as np

from litenet.errors import LiteNetError
from litenet.model import init_params, load_preset, param_views
from litenet.train import network
from litenet.train import reference as ref

DEFAULT_PRESET = "litenet-seed"  # one block, the seed's network: the shortest trace to read


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default=DEFAULT_PRESET, help=f"preset name or .toml (default {DEFAULT_PRESET})")
    parser.add_argument("--model", help="trace a trained model folder instead of a fresh initialisation")
    parser.add_argument("--batch", type=int, default=2, help="images in the batch (default 2)")
    parser.add_argument("--random", action="store_true", help="use seeded random images, not CIFAR-10 test images")
    parser.add_argument("--values", type=int, default=4, help="values shown per tensor (default 4)")
    parser.add_argument("--pdb", action="store_true", help="stop in the debugger at the first step (n: next, s: step in)")
    parser.add_argument("--data", help="CIFAR-10 folder or archive (default: the usual search order)")
    parser.add_argument("--maps", help="folder of the converted memory maps")


class Printer:
    """Prints each step: a tag, what it computes, the formula, the function, shapes and leading values."""

    def __init__(self, values: int, out=None):
        self.values, self._out = values, out

    @property
    def out(self):
        return self._out or sys.stdout  # looked up when printing, so redirected output is followed

    def head(self, text: str) -> None:
        print(f"\n── {text} " + "─" * max(0, 70 - len(text)), file=self.out)

    def step(self, tag: str, what: str, formula: str, function: str, inputs: dict, outputs: dict) -> None:
        print(f"{tag:>4}  {what}: {formula}    [{function}]", file=self.out)
        shapes = "  ".join(f"{k} {tuple(np.shape(v))}" for k, v in inputs.items())
        results = "  ".join(f"{k} {tuple(np.shape(v))}" for k, v in outputs.items())
        print(f"      {shapes}  →  {results}", file=self.out)
        for name, value in outputs.items():
            print(f"      {name}{self._where(value)} = {self._values(value)}", file=self.out)

    def note(self, text: str) -> None:
        print(f"      {text}", file=self.out)

    def _where(self, value) -> str:
        value = np.asarray(value)
        return "" if value.ndim == 0 else f"[{', '.join(['0'] * (value.ndim - 1))}, :{self.values}]" if value.ndim > 1 \
            else f"[:{self.values}]"

    def _values(self, value) -> str:
        value = np.asarray(value, np.float64)
        if value.ndim == 0:
            return f"{float(value):.6g}"
        row = value.reshape(-1, value.shape[-1])[0, :self.values]
        return "[" + ", ".join(f"{v:+.4g}" for v in row) + (", …]" if value.shape[-1] > self.values else "]")


def explicit_sum(left: np.ndarray, right: np.ndarray, i: int, j: int) -> str:
    """∂W[i, j] = Σ_b left[b, i] · right[b, j], written out term by term (up to 4 terms)."""
    terms = [f"({left[b, i]:+.4g})·({right[b, j]:+.4g})" for b in range(min(4, len(left)))]
    more = " + …" if len(left) > 4 else ""
    return " + ".join(terms) + more + f" = {float(left[:, i] @ right[:, j]):+.6g}"


def trace(params: np.ndarray, images: np.ndarray, labels: np.ndarray, model, train, pr: Printer,
          stop: bool = False) -> dict:
    """Run and print one forward and backward pass; returns the gradients by parameter name."""
    if stop:  # NOTE: n steps over a line; s on a `ref.` line steps into the reference function
        import pdb
        pdb.set_trace()
    p = param_views(params, model)
    g: dict[str, np.ndarray] = {}
    pr.head(f"forward: {len(images)} images, labels {labels.tolist()}")
    x = ref.pixels_to_float(images, params.dtype.type)
    pr.step("F1", "scale", "x = pixels / 255", "ref.pixels_to_float", {"pixels": images}, {"x": x})
    s = ref.embed_inputs(x, model.embed, model.input_shift)
    formula = ("s[b, i] = Σ_k (x[b, i, k] − shift)  (colours summed)" if model.embed == "channel-sum"
               else "s[b, 3i + k] = x[b, i, k] − shift  (all 3072 values)")
    pr.step("F2", "embedding input", formula + f", shift = {model.input_shift}", "ref.embed_inputs", {"x": x}, {"s": s})
    h = s @ p["embed.weight"]
    pr.step("F3", "embedding", "h0 = s We  (no bias)", "matmul, as network.forward", {"s": s, "We": p["embed.weight"]}, {"h0": h})
    saved = []
    for i in range(model.blocks):
        k = f"blocks.{i}"
        pr.head(f"block {i}: main path d→H→d, identity side path, LayerNorm")
        u = ref.linear_forward(h, p[f"{k}.fc1.weight"], p[f"{k}.fc1.bias"])
        pr.step(f"F{4 + 4 * i}", "main path in", "u = x W1 + b1", "ref.linear_forward", {"x": h, "W1": p[f"{k}.fc1.weight"]}, {"u": u})
        a = ref.gelu_forward(u)
        pr.step(f"F{5 + 4 * i}", "GELU", "a = ½ u (1 + tanh(c (u + 0.044715 u³)))", "ref.gelu_forward", {"u": u}, {"a": a})
        v = ref.linear_forward(a, p[f"{k}.fc2.weight"], p[f"{k}.fc2.bias"])
        pr.step(f"F{6 + 4 * i}", "main path out", "v = a W2 + b2", "ref.linear_forward", {"a": a, "W2": p[f"{k}.fc2.weight"]}, {"v": v})
        y, cache = ref.residual_layernorm_forward(h, v, p[f"{k}.ln.gamma"], p[f"{k}.ln.beta"], model.ln_eps)
        pr.step(f"F{7 + 4 * i}", "residual + LayerNorm", "y = γ (x + v − μ) / √(σ² + eps) + β", "ref.residual_layernorm_forward",
                {"x": h, "v": v}, {"y": y})
        saved.append((h, u, a, cache))
        h = y
    pr.head("head and loss")
    z = ref.linear_forward(h, p["head.weight"], p["head.bias"])
    pr.step(f"F{4 + 4 * model.blocks}", "logits", "z = y Wc + bc", "ref.linear_forward",
            {"y": h, "Wc": p["head.weight"]}, {"z": z})
    if train.loss == "margin":
        loss, per_sample = ref.margin_loss_forward(z, labels, train.margin)
        pr.step("L", "margin loss", f"L = mean_i max(0, {train.margin} − z[i, y_i] + max_(j≠y_i) z[i, j])",
                "ref.margin_loss_forward", {"z": z}, {"L": loss, "per image": per_sample})
        dz = ref.margin_loss_backward(z, labels, train.margin)
        formula, fn = "∂z[i, y_i] = −1/B, ∂z[i, rival_i] = +1/B where the hinge is active", "ref.margin_loss_backward"
    else:
        loss, per_sample = ref.cross_entropy_forward(z, labels)
        pr.step("L", "cross-entropy", "L = mean_i (logsumexp(z_i) − z[i, y_i])", "ref.cross_entropy_forward",
                {"z": z}, {"L": loss, "per image": per_sample})
        dz = ref.cross_entropy_backward(z, labels)
        formula, fn = "∂z = (softmax(z) − onehot(y)) / B", "ref.cross_entropy_backward"
    pr.head("backward: from ∂L/∂z to every ∂L/∂W")
    pr.step("B1", "loss gradient", formula, fn, {"z": z}, {"∂z": dz})
    dh, g["head.weight"], g["head.bias"] = ref.linear_backward(dz, h, p["head.weight"])
    pr.step("B2", "head", "∂y = ∂z Wcᵀ,  ∂Wc = yᵀ ∂z,  ∂bc = Σ_b ∂z", "ref.linear_backward",
            {"∂z": dz, "y": h}, {"∂y": dh, "∂Wc": g["head.weight"]})
    pr.note("∂Wc[0, 0] = Σ_b y[b, 0] · ∂z[b, 0] = " + explicit_sum(h, dz, 0, 0))
    tag = 3
    for i in reversed(range(model.blocks)):
        k = f"blocks.{i}"
        x_in, u, a, cache = saved[i]
        pr.head(f"block {i} backward")
        ds, g[f"{k}.ln.gamma"], g[f"{k}.ln.beta"] = ref.residual_layernorm_backward(dh, cache, p[f"{k}.ln.gamma"])
        pr.step(f"B{tag}", "LayerNorm", "∂s = rstd (∂n − mean(∂n) − n · mean(∂n n)),  ∂n = ∂y γ", "ref.residual_layernorm_backward",
                {"∂y": dh}, {"∂s": ds, "∂γ": g[f"{k}.ln.gamma"]})
        da, g[f"{k}.fc2.weight"], g[f"{k}.fc2.bias"] = ref.linear_backward(ds, a, p[f"{k}.fc2.weight"])
        pr.step(f"B{tag + 1}", "main path out", "∂a = ∂s W2ᵀ,  ∂W2 = aᵀ ∂s  (∂v = ∂s: the sum passes it on)", "ref.linear_backward",
                {"∂s": ds, "a": a}, {"∂a": da, "∂W2": g[f"{k}.fc2.weight"]})
        pr.note("∂W2[0, 0] = Σ_b a[b, 0] · ∂s[b, 0] = " + explicit_sum(a, ds, 0, 0))
        du = ref.gelu_backward(da, u)
        pr.step(f"B{tag + 2}", "GELU", "∂u = ∂a · GELU'(u)", "ref.gelu_backward", {"∂a": da, "u": u}, {"∂u": du})
        dx_main, g[f"{k}.fc1.weight"], g[f"{k}.fc1.bias"] = ref.linear_backward(du, x_in, p[f"{k}.fc1.weight"])
        pr.step(f"B{tag + 3}", "main path in", "∂x_main = ∂u W1ᵀ,  ∂W1 = xᵀ ∂u", "ref.linear_backward",
                {"∂u": du, "x": x_in}, {"∂x_main": dx_main, "∂W1": g[f"{k}.fc1.weight"]})
        pr.note("∂W1[0, 0] = Σ_b x[b, 0] · ∂u[b, 0] = " + explicit_sum(x_in, du, 0, 0))
        dh, (S, M, C) = ref.residual_join(ds, dx_main)
        pr.step(f"B{tag + 4}", "paths join", "∂x = ∂s (identity path) + ∂x_main (main path)", "ref.residual_join",
                {"∂s": ds, "∂x_main": dx_main}, {"∂x": dh})
        pr.note(f"‖∂s‖² = {S:.4g}, ‖∂x_main‖² = {M:.4g}, ⟨∂s, ∂x_main⟩ = {C:.4g}: identity-path share "
                f"{np.sqrt(S) / (np.sqrt(S) + np.sqrt(M)):.1%} by norm, {(S + C) / (S + M + 2 * C):.1%} by projection")
        tag += 5
    pr.head("embedding backward")
    g["embed.weight"], dx = ref.embed_backward(dh, x, p["embed.weight"], model.embed, model.input_shift,
                                               want_dx=True, inputs=s)
    pr.step(f"B{tag}", "embedding", "∂We = sᵀ ∂h0  (and ∂x = ∂h0 Weᵀ, spread over the colours)", "ref.embed_backward",
            {"∂h0": dh, "s": s}, {"∂We": g["embed.weight"], "∂x": dx})
    pr.note("∂We[0, 0] = Σ_b s[b, 0] · ∂h0[b, 0] = " + explicit_sum(s, dh, 0, 0))
    return g


def check_against_network(params, images, labels, model, train, grads: dict) -> float:
    """Largest |difference| between the trace's gradients and network.loss_and_grads' (0 when the same code ran)."""
    _, flat, _, _ = network.loss_and_grads(params, images, labels, model, train.loss, train.margin)
    views = param_views(flat, model)
    return max(float(np.max(np.abs(views[k] - v))) for k, v in grads.items())


def _batch(args, count: int):
    if count < 1:
        raise LiteNetError("--batch must be at least 1")
    if not args.random:
        from litenet.data import open_cifar10
        try:
            test = open_cifar10(data=args.data, maps=args.maps, download=False, progress=False).test
            return np.asarray(test.images[:count]), np.asarray(test.labels[:count], np.int64), "CIFAR-10 test images"
        except LiteNetError as exc:
            print(f"litenet trace: no CIFAR-10 ({exc}); using random images", file=sys.stderr)
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, count), "random images"


def run(args) -> int:
    if args.model:
        from litenet.insight.common import load_trained
        params, model, train, _, folder = load_trained(args.model)
        source = f"trained model {folder}"
    else:
        preset = load_preset(args.preset)
        model, train = preset.model, preset.train
        params, source = init_params(model, train.seed), f"preset {preset.name}, seeded initialisation"
    images, labels, what = _batch(args, args.batch)
    print(f"litenet trace: {source}; {len(images)} {what}; every step calls litenet/train/reference.py")
    grads = trace(params, images, labels, model, train, Printer(args.values), stop=args.pdb)
    diff = check_against_network(params, images, labels, model, train, grads)
    print(f"\nsame gradients as network.loss_and_grads (used in training): max |difference| = {diff:.3g}")
    return 0
