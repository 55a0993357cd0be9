"""`litenet trace`: one tiny batch through the network, every forward and backward step printed.

The trace is training's own pass: the op list (litenet.graph) walked by litenet.forward.run and
network.backward, printing from their hooks, so every value shown is computed by the litenet.ops
function that training calls (no copies), and under a debugger (`--pdb`, then `s`) a student steps
straight into the code that trains the model. Any preset: the MLPs and the Mixer.
"""

from __future__ import annotations

import sys

import numpy as np

from litenet import forward as forward_mod
from litenet import ops  # noqa: F401  (what the trace's steps call; a debugger steps into it)
from litenet.errors import LiteNetError, UsageError
from litenet.limits import MAX_TRACE_BATCH
from litenet.graph import ops_of
from litenet.model import init_params, load_preset, param_views
from litenet.train import network

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
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cuda"],
                        help="numpy: the trace (default); cuda: the step as the CUDA backend would launch it, op by op "
                             "with its kernels (the lowering; needs no GPU)")
    parser.add_argument("--kernels", default="fast", choices=["fast", "reference"],
                        help="--backend cuda: the fast kernels where they cover the network, or the reference kernels alone")
    parser.add_argument("--precision", choices=["fp32", "tf32", "bf16"],
                        help="--backend cuda: the products' precision (default: the preset's)")
    parser.add_argument("--sm-count", type=int, default=132,
                        help="--backend cuda: the GPU's multiprocessors the tile choice plans for (default 132, an H200)")


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
    """∂W[i, j] = Σ_r left[r, i] · right[r, j] over the rows r, written out term by term (up to 4 terms)."""
    terms = [f"({left[r, i]:+.4g})·({right[r, j]:+.4g})" for r in range(min(4, len(left)))]
    more = " + …" if len(left) > 4 else ""
    return " + ".join(terms) + more + f" = {float(left[:, i] @ right[:, j]):+.6g}"


# kind → (what it is, its formula, the litenet.ops function that computes it), forward and backward
FORWARD = {
    "pixel_rows": ("embedding input", lambda op: (
        f"s[b, i] = Σ_k (x[b, i, k] − {op.attrs['input_shift']})  (colours summed)" if op.attrs["embed"] == "channel-sum"
        else f"s[b, 3i + k] = x[b, i, k] − {op.attrs['input_shift']}  (all 3072 values)"), "ops.embed_inputs"),
    "patches": ("patches", lambda op: f"p[t, b] = (the {op.attrs['patch']}×{op.attrs['patch']}×3 pixels of patch t "
                f"− {op.attrs['input_shift']}) · {op.attrs['input_scale']}, tokens-major (T, B, P·P·3)", "ops.patchify"),
    "linear": ("product", "y = x W (+ b) over the channels", "ops.linear_forward"),
    "token_linear": ("product across the patches", "y[j] = Σ_t W[t, j] x[t] + b[j], for every image and channel",
                     "ops.token_linear_forward"),
    "gelu": ("GELU", "a = ½ u (1 + tanh(c (u + 0.044715 u³)))", "ops.gelu_forward"),
    "residual": ("residual join", "s = x + v: the identity path plus the branch", "x + v"),
    "layernorm": ("LayerNorm", "y = γ (s − μ) / √(σ² + eps) + β", "ops.layernorm_forward"),
    "mean_tokens": ("mean over the patches", "y = (1/T) Σ_t x[t]", "ops.mean_tokens_forward"),
}
BACKWARD = {
    "pixel_rows": ("∂x[b, i, k] = ∂s[b, i] (spread over the colours a sum took)", "ops.embed_inputs_backward"),
    "patches": ("∂x: each patch's ∂ put back on the pixels it took", "ops.patchify_backward"),
    "linear": ("∂x = ∂y Wᵀ,  ∂W = xᵀ ∂y,  ∂b = Σ_rows ∂y", "ops.linear_backward"),
    "token_linear": ("∂x = W ∂y,  ∂W = x ∂yᵀ (over images and channels),  ∂b = Σ ∂y", "ops.token_linear_backward"),
    "gelu": ("∂u = ∂a · GELU'(u)", "ops.gelu_backward"),
    "residual": ("∂x = ∂v = ∂s: the sum passes ∂ on to both paths unchanged", "network.BACKWARD"),
    "layernorm": ("∂s = rstd (∂n − mean(∂n) − n · mean(∂n n)),  ∂n = ∂y γ,  ∂γ = Σ ∂y n,  ∂β = Σ ∂y",
                  "ops.layernorm_backward"),
    "mean_tokens": ("∂x[t] = ∂y / T for every patch t", "ops.mean_tokens_backward"),
}


def _block(name: str) -> str:
    """"blocks.3.fc1" → "block 3"; anything outside the blocks → ""."""
    return f"block {name.split('.')[1]}" if name.startswith("blocks.") else ""


def trace(params: np.ndarray, images: np.ndarray, labels: np.ndarray, model, train, pr: Printer,
          stop: bool = False) -> dict:
    """Run and print one forward and backward pass — the op list walked by litenet.forward and
    network.backward, printing from their hooks; returns the gradients by parameter name."""
    if stop:  # NOTE: n steps over a line; s steps into the walk, and on into litenet.ops
        import pdb
        pdb.set_trace()
    p = param_views(params, model)
    counter = iter(range(1, 10_000))
    pr.head(f"forward: {len(images)} images, labels {labels.tolist()}")
    seen = {"block": None}

    def forward_step(op, inputs, out):
        if _block(op.name) != seen["block"]:
            seen["block"] = _block(op.name)
            pr.head(seen["block"] or op.name)
        what, formula, function = FORWARD[op.kind]
        formula = formula(op) if callable(formula) else formula
        named = dict(zip(op.inputs, inputs), **{w.name: p[w.name] for w in op.params if w.kind == "weight"})
        pr.step(f"F{next(counter)}", f"{op.name}: {what}", formula, function, named, {op.name: out})

    tape = forward_mod.run(ops_of(model), p, images, dtype=params.dtype.type, keep=True, on_op=forward_step)
    z = tape.z
    loss, per_sample, dz = network.loss_and_dlogits(z, labels, train.loss, train.margin, train.label_smoothing)
    name = "margin loss" if train.loss == "margin" else "cross-entropy"
    formula = (f"L = mean_i max(0, {train.margin} − z[i, y_i] + max_(j≠y_i) z[i, j]);  ∂z[i, y_i] = −1/B, "
               "∂z[i, rival_i] = +1/B where the hinge is active" if train.loss == "margin" else
               "L = mean_i (logsumexp(z_i) − Σ_j q_ij z_ij), q = (1 − ε) onehot + ε/C;  ∂z = (softmax(z) − q) / B")
    pr.head("loss")
    pr.step("L", name, formula, f"ops.{'margin_loss' if train.loss == 'margin' else 'cross_entropy'}_forward/backward",
            {"z": z}, {"L": loss, "per image": per_sample, "∂z": dz})
    pr.head("backward: from ∂L/∂z to every ∂L/∂W")
    seen["block"] = None
    counter = iter(range(1, 10_000))

    def backward_step(op, dy, dins, dparams, join):
        if _block(op.name) != seen["block"]:
            seen["block"] = _block(op.name)
            pr.head(f"{seen['block']} backward" if seen["block"] else f"{op.name} backward")
        if join is not None:  # the gradient of this op's output gathered from the identity path and the branch
            S, M, C = network.path_sums(join)
            pr.note(f"paths join at {op.name}: ∂x = ∂s (identity path) + ∂x_main (branch); ‖∂s‖² = {S:.4g}, "
                    f"‖∂x_main‖² = {M:.4g}, ⟨∂s, ∂x_main⟩ = {C:.4g}: identity-path share "
                    f"{np.sqrt(S) / (np.sqrt(S) + np.sqrt(M)):.1%} by norm, {(S + C) / (S + M + 2 * C):.1%} by projection")
        formula, function = BACKWARD[op.kind]
        outputs = {f"∂{name}": d for name, d in zip(op.inputs, dins) if d is not None}
        outputs.update({f"∂{op.param(kind)}": d for kind, d in dparams.items()})
        pr.step(f"B{next(counter)}", f"{op.name}", formula, function, {f"∂{op.name}": dy}, outputs)
        if op.kind == "linear" and "weight" in dparams:
            x = tape.values[op.inputs[0]]
            rows_x, rows_dy = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
            pr.note(f"∂{op.param('weight')}[0, 0] = Σ_rows x[r, 0] · ∂y[r, 0] = " + explicit_sum(rows_x, rows_dy, 0, 0))

    grads, dx, _ = network.backward(params, tape, dz, model, want_dx=True, on_op=backward_step)
    return {k: np.array(v) for k, v in param_views(grads, model).items()}


def check_against_network(params, images, labels, model, train, grads: dict) -> float:
    """Largest |difference| between the trace's gradients and network.loss_and_grads' (0 when the same code ran)."""
    _, flat, _, _ = network.loss_and_grads(params, images, labels, model, train.loss, train.margin,
                                           smoothing=train.label_smoothing)
    views = param_views(flat, model)
    return max(float(np.max(np.abs(views[k] - v))) for k, v in grads.items())


def _settings(args):
    """(model, train) of --model's trained folder, or of --preset."""
    if args.model:
        from litenet.insight.common import load_trained
        return load_trained(args.model)[1:3]
    preset = load_preset(args.preset)
    return preset.model, preset.train


def _batch(args, count: int):
    if not args.random:
        from litenet.data import open_cifar10
        try:
            test = open_cifar10(data=args.data, maps=args.maps, download=False, progress=False).test
            return np.asarray(test.images[:count]), np.asarray(test.labels[:count], np.int64), "CIFAR-10 test images"
        except LiteNetError as exc:
            print(f"litenet trace: no CIFAR-10 ({exc}); using random images", file=sys.stderr)
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, count), "random images"


def launches(model, train, precision: str | None, kernels: str, sm_count: int) -> str:
    """The training step's launch list as the CUDA backend would run it (litenet.lowering): region by region,
    each named after its ops, with the rewrite that made it and each kernel launch."""
    from litenet.lowering import lower_training

    if sm_count < 1:
        raise UsageError(f"--sm-count {sm_count}: a GPU has at least one multiprocessor")
    program = lower_training(model, train, train.batch_size, 16, kernels, precision=precision or train.precision,
                             sm_count=sm_count)
    return program.describe()


def run(args) -> int:
    if not 1 <= args.batch <= MAX_TRACE_BATCH:  # every value of every image is traced: a few suffice
        raise UsageError(f"--batch {args.batch}: trace 1 … {MAX_TRACE_BATCH} images")
    if args.values < 1:
        raise UsageError(f"--values {args.values}: show at least 1 value per tensor")
    if args.backend == "cuda":
        model, train = _settings(args)
        print(launches(model, train, args.precision, args.kernels, args.sm_count))
        return 0
    if args.model:
        from litenet.insight.common import load_trained
        params, model, train, _, folder = load_trained(args.model)
        source = f"trained model {folder}"
    else:
        preset = load_preset(args.preset)
        model, train = preset.model, preset.train
        params, source = init_params(model, train.seed), f"preset {preset.name}, seeded initialisation"
    images, labels, what = _batch(args, args.batch)
    print(f"litenet trace: {source}; {len(images)} {what}; every step calls litenet/ops.py")
    grads = trace(params, images, labels, model, train, Printer(args.values), stop=args.pdb)
    diff = check_against_network(params, images, labels, model, train, grads)
    print(f"\nsame gradients as network.loss_and_grads (used in training): max |difference| = {diff:.3g}")
    return 0
