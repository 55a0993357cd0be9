"""`litenet gradcheck`: the hand-written backward against central finite differences in float64.

For every parameter tensor and for the input image, sampled coordinates and random directions are
perturbed by ±ε and the change of the loss is compared with the analytic gradient. Both losses
are checked (and cross-entropy with label smoothing). The margin loss has kinks (where the hinge switches on and where the rival class
changes), so the batch is drawn away from them: a difference quotient across a kink measures
nothing about the code.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from litenet.errors import UsageError
from litenet.model import AnyModel, init_params, load_preset, param_layout, param_views, preset_names
from litenet.train import network
from litenet import ops

EPS = 1e-6  # float64: truncation error ~ε² and rounding ~1e-16/ε both stay far below 1e-6
TOLERANCE = 1e-6
KINK_DISTANCE = 1e-3  # keep every hinge value and rival gap this far from switching


@dataclasses.dataclass
class CheckResult:
    name: str  # parameter tensor, "input", or "direction"
    loss: str
    rel_error: float


LOSSES = (("margin", 0.0), ("cross-entropy", 0.0), ("cross-entropy", 0.1))  # (loss, label smoothing)


def _loss(params, images, labels, model, loss, margin, smoothing=0.0):
    return network.loss_and_dlogits(network.forward(params, images, model).z, labels, loss, margin, smoothing)[0]


def _away_from_kinks(params, images, labels, model, margin) -> bool:
    z = network.forward(params, images, model).z
    rows = np.arange(len(labels))
    hinge = margin - z[rows, labels] + z[rows, ops.rival_class(z, labels)]
    others = np.sort(np.where(np.eye(z.shape[1], dtype=bool)[labels], -np.inf, z), axis=1)
    rival_gap = others[:, -1] - others[:, -2]
    return bool(np.all(np.abs(hinge) > KINK_DISTANCE) and np.all(rival_gap > KINK_DISTANCE)
                and np.mean(hinge > 0) >= 0.5)


def _draw_batch(model: AnyModel, params, margin: float, seed: int, batch: int):
    """Random [0, 1] images and labels with at least half the hinges active and none near a kink."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        images = rng.random((batch, 32, 32, 3))
        labels = rng.integers(0, model.classes, batch)
        if _away_from_kinks(params, images, labels, model, margin):
            return images, labels
    raise RuntimeError("could not draw a batch away from the margin loss's kinks")


def relative_error(analytic: np.ndarray, numeric: np.ndarray, noise: float = 0.0) -> float:
    """‖a − n‖ / max(‖a‖, ‖n‖): scale-free, and not fooled by single tiny entries.

    Where both lie below `noise`, the finite differences' own rounding error (`fd_noise`), there
    is nothing to compare: the gradient is zero to within what the check can see, and 0 is
    returned. That happens for real: the bias of the Mixer's second product across the patches
    adds the same value to every channel of a patch, which the LayerNorm after it removes, so the
    loss does not depend on it at all.
    """
    a, n = np.linalg.norm(analytic), np.linalg.norm(numeric)
    if max(a, n) < noise:
        return 0.0
    return float(np.linalg.norm(analytic - numeric) / max(a, n, 1e-30))


def fd_noise(loss: float, count: int) -> float:
    """A bound on ‖numeric gradient‖ of `count` coordinates whose true gradient is 0: each central
    difference carries the rounding of two float64 losses, about 2·2⁻⁵²·|L| / (2ε), taken ×100."""
    return 100 * float(np.finfo(np.float64).eps) * max(abs(loss), 1.0) / EPS * np.sqrt(count)


# The default is quick enough to run casually (seconds a preset); --full is the check of record.
QUICK = {"samples": 4, "directions": 1}
FULL = {"samples": 24, "directions": 4}


def check_model(model: AnyModel, margin: float = 0.3, seed: int = 0, batch: int = 4,
                samples: int = 24, directions: int = 4, progress=None) -> list[CheckResult]:
    """Finite-difference check of every parameter tensor and the input, for both losses;
    `progress(done, total, result)` is called after each tensor."""
    rng = np.random.default_rng(seed + 1)
    params = init_params(model, seed, np.float64)
    # Move γ and β off 1 and 0 so their gradients are not checked only at a special point.
    views = param_views(params, model)
    for p in param_layout(model):
        if p.kind in ("gamma", "beta"):
            views[p.name][...] += rng.uniform(-0.3, 0.3, p.shape)
    images, labels = _draw_batch(model, params, margin, seed, batch)
    results = []
    total = len(LOSSES) * (len(param_layout(model)) + 1)

    def add(result: CheckResult) -> None:
        results.append(result)
        if progress is not None and result.name != "direction":
            progress(sum(r.name != "direction" for r in results), total, result)

    for loss, smoothing in LOSSES:
        value, grads, dx, _ = network.loss_and_grads(params, images, labels, model, loss, margin, want_dx=True,
                                                     smoothing=smoothing)
        label = f"{loss}, smoothing {smoothing}" if smoothing else loss

        def f(p=params, x=images):
            return _loss(p, x, labels, model, loss, margin, smoothing)

        for p in param_layout(model):
            coords = rng.choice(p.size, size=min(samples, p.size), replace=False) + p.offset
            numeric = np.array([_central(lambda e, i=i: _with_bump(params, i, e, f), EPS) for i in coords])
            add(CheckResult(p.name, label, relative_error(grads[coords], numeric, fd_noise(value, len(coords)))))
        pixels = rng.choice(images.size, size=samples, replace=False)
        numeric = np.array([_central(lambda e, i=i: _with_bump(images, i, e, lambda: f(x=images)), EPS)
                            for i in pixels])
        add(CheckResult("input", label, relative_error(dx.ravel()[pixels], numeric)))
        for _ in range(directions):  # the whole gradient at once, along random directions
            r = rng.standard_normal(params.shape)
            numeric = _central(lambda e: f(params + e * r), EPS)
            # g·r for r ~ N(0, I) is of the order of ‖g‖; one that happens to come out near 0 is
            # measured against ‖g‖, not against itself (its own size would make noise look large)
            scale = max(abs(grads @ r), abs(numeric), float(np.linalg.norm(grads)))
            results.append(CheckResult("direction", label, abs(grads @ r - numeric) / scale))
    return results


def _with_bump(array: np.ndarray, flat_index: int, eps: float, f) -> float:
    """f() with one entry of `array` moved by eps, restored afterwards (copying a large buffer per
    evaluation would cost more than the forward itself)."""
    flat = array.reshape(-1)
    saved = flat[flat_index]
    flat[flat_index] = saved + eps
    try:
        return f()
    finally:
        flat[flat_index] = saved


def _central(f, eps: float) -> float:
    return (f(eps) - f(-eps)) / (2 * eps)


# ---------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser) -> None:
    parser.add_argument("--preset", action="append", help="preset name or .toml (repeatable; default: every preset)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print every tensor's error")
    parser.add_argument("--full", action="store_true",
                        help=f"the check of record: {FULL['samples']} entries of every tensor and {FULL['directions']} "
                             f"random directions per loss (default: {QUICK['samples']} entries and "
                             f"{QUICK['directions']} direction, a few times faster); durations in README.md")
    parser.add_argument("--no-progress", action="store_true", help="no line per tensor on stderr")


def run(args) -> int:
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: give a seed ≥ 0")
    worst_overall = 0.0
    sizes = FULL if args.full else QUICK
    for name in args.preset or preset_names():
        preset = load_preset(name)
        started = time.perf_counter()

        def progress(done, total, result, name=preset.name, started=started):
            print(f"  {name}: {done}/{total} {result.name} ({result.loss}) {result.rel_error:.1e}, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

        results = check_model(preset.model, preset.train.margin, seed=args.seed, **sizes,
                              progress=None if args.no_progress else progress)
        worst = max(results, key=lambda r: r.rel_error)
        worst_overall = max(worst_overall, worst.rel_error)
        if args.verbose:
            for r in results:
                print(f"  {r.loss:14s} {r.name:24s} {r.rel_error:.2e}")
        verdict = "ok" if worst.rel_error <= TOLERANCE else "FAILED"
        print(f"{preset.name}: {len(results)} checks ({'full' if args.full else 'quick; --full for the check of record'}), "
              f"worst relative error {worst.rel_error:.2e} ({worst.name}, {worst.loss} loss) — {verdict} "
              f"in {time.perf_counter() - started:.0f} s", flush=True)
    if worst_overall > TOLERANCE:
        print(f"gradcheck: errors above {TOLERANCE:g}", file=sys.stderr)
        return 1
    return 0
