"""`check_kernels`: run a step launch by launch and hold every kernel's output to its NumPy twin.

Each launch carries a `Check`: the buffers it reads (copied to the host before it runs), the
buffers it writes (copied after), and its twin, which recomputes the outputs in float64 from the
copied inputs with the functions of litenet.train.reference. The first output outside its
tolerance raises `KernelMismatch`, naming the kernel and the tensor.

Tolerances are computed, not tuned (CONVENTIONS.md): a value that is a sum of n rounded float32
terms is allowed |got − want| ≤ atol + rtol·|want| with rtol = safety · u · √n (u = 2⁻²⁴, the
unit roundoff; √n is the typical growth of rounding error in a sum) and atol = rtol · max|want|,
which covers outputs where large terms cancel to a small sum. Where a whole output cancels by
design (a gradient the LayerNorm after it makes nearly zero: the Mixer's token_fc2 bias), max|twin|
is itself rounding noise; such twins also give each value's ‖terms‖₂, the size of the rounded
products behind it, and atol = rtol · max(max|twin|, max‖terms‖₂) — for terms of random sign
‖terms‖₂ ≈ |twin|, so the rule only widens where the terms cancel.

Two ways to find a launch's twin: the MLP's plan attaches a `Check` to each launch (twins.py);
the Mixer's launches carry none and are matched by kernel name to the table of mixer_twins.py,
which reads the launch's own arguments (`run_against_twin`). `check_step` runs a step either way
and names the step and the launch's position in it when a kernel is off.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from litenet.gpu import sources
from litenet.train.cuda.schedule_ring import split_precision
from litenet.train.reference import bf16_values


class KernelMismatch(AssertionError):
    """A kernel's output differs from its NumPy twin beyond the computed tolerance (an internal bug)."""


@dataclass(frozen=True)
class Tolerance:
    unit: float  # the dtype's unit roundoff
    safety: float  # headroom over the typical √n growth

    def bounds(self, terms: int, want: np.ndarray, term_norms=None) -> tuple[float, float]:
        rtol = self.safety * self.unit * math.sqrt(max(terms, 1))
        scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
        if term_norms is not None and np.size(term_norms):
            scale = max(scale, float(np.max(term_norms)))
        return rtol * scale, rtol


# float32 kernels against float64 twins. safety 16: the GPU's tanhf/expf are within 2 ulp and the
# compiler may fuse a·b + c into one rounding or not; 16·√n covers both without hiding a real bug
# (a wrong index or a missed term is off by O(1), not by 1e-6).
FLOAT32 = Tolerance(unit=2.0 ** -24, safety=16.0)
# Tensor-core products (mma.cuh) round both operands before multiplying: TF32 keeps 10 mantissa
# bits (unit 2⁻¹¹), BF16 7 (unit 2⁻⁸). Each product is then exact in fp32 and the fp32 sums add
# only 2⁻²⁴-sized errors, so the operands' rounding, about 2u per product with random signs,
# dominates: safety 4 is those 2 times 2 of headroom over the √n growth.
TF32 = Tolerance(unit=2.0 ** -11, safety=4.0)
BF16 = Tolerance(unit=2.0 ** -8, safety=4.0)
EXACT = Tolerance(unit=0.0, safety=0.0)  # integers and counters: no rounding stands behind them
TOLERANCES = {"fp32": FLOAT32, "tf32": TF32, "bf16": BF16}


def compare(kernel: str, tensor: str, got, want, terms: int, tol: Tolerance = FLOAT32, term_norms=None) -> float:
    """Raise KernelMismatch unless got ≈ want; returns the largest error relative to the bound.
    `term_norms`: ‖terms‖₂ of each value, for sums that may cancel (see the module's docstring)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        got = got.reshape(want.shape) if got.size == want.size else got
    if got.shape != want.shape:
        raise KernelMismatch(f"{kernel}: {tensor} has shape {got.shape}, its twin {want.shape}")
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        bad = np.argwhere(~np.isfinite(got))[0]
        raise KernelMismatch(f"{kernel}: {tensor} holds {got[tuple(bad)]} at {tuple(bad)}; its twin is finite")
    atol, rtol = tol.bounds(terms, want, term_norms)
    allowed = atol + rtol * np.abs(want)
    err = np.abs(got - want)
    ratio = err / np.maximum(allowed, np.finfo(np.float64).tiny)
    if np.size(ratio) and np.max(ratio) > 1.0:
        at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        raise KernelMismatch(
            f"{kernel}: {tensor} differs from its NumPy twin, worst at {tuple(int(i) for i in at)}: "
            f"kernel {got[at]:.9g}, twin {want[at]:.9g}, |error| {err[at]:.3g} > tolerance {allowed[at]:.3g} "
            f"(= {atol:.3g} + {rtol:.3g}·|twin| for sums of {terms} terms)")
    return float(np.max(ratio)) if np.size(ratio) else 0.0


View = Any  # a device array, or a function of the step position returning one


@dataclass
class Check:
    """How to hold one launch to its twin."""

    reads: dict[str, View]
    writes: dict[str, View]
    twin: Callable[[dict[str, np.ndarray], int], dict[str, Any]]
    terms: dict[str, int] = field(default_factory=dict)  # output → terms per value (default 1)
    tol: Tolerance = FLOAT32  # a tensor-core product's: its precision's (TOLERANCES)
    tols: dict[str, Tolerance] = field(default_factory=dict)  # outputs held to another tolerance than `tol`

    def with_copy(self, output: str, copy, terms: int = 1) -> "Check":
        """This check, and the kernel's BF16 copy of `output` (bf16_copy.cuh: a `…_with_copy` kernel's,
        or a wide BF16 product's epilogue's) held to the twin's `output` at BF16's tolerance for `terms`
        rounded terms: 1 (one more rounding of an fp32 result), or a BF16 product's own count."""
        name = output + " in BF16"
        def twin(i, pos):
            want = self.twin(i, pos)
            return {**want, name: want[output]}
        return dataclasses.replace(self, writes={**self.writes, name: copy}, twin=twin,
                                   terms={**self.terms, name: terms}, tols={**self.tols, name: BF16})


def _resolve(view: View, pos: int):
    return view(pos) if callable(view) else view


def _host(device, view, pos: int) -> np.ndarray:
    """A buffer on the host: floats in float64; uint16 buffers hold BF16 bits (the products' copies,
    litenet.gpu.sources.POINTEE), compared by their values."""
    a = device.download(_resolve(view, pos))
    if a.dtype == np.uint16:
        return bf16_values(a).astype(np.float64)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def run_checked(device, launch, pos: int) -> dict[str, float]:
    """Launch with its check; returns output → largest error as a fraction of its bound."""
    check = launch.check
    inputs = {k: _host(device, v, pos) for k, v in check.reads.items()}
    device.launch(launch)
    device.synchronize()
    got = {k: _host(device, v, pos) for k, v in check.writes.items()}
    want = check.twin(inputs, pos)
    return {k: compare(launch.kernel, k, got[k], w, check.terms.get(k, 1), check.tols.get(k, check.tol))
            for k, w in want.items()}


# -- the Mixer's launches, matched by kernel name (mixer_twins.py) ----------------------------------------

def _address(a) -> int:
    ptr = getattr(getattr(a, "data", None), "ptr", None)  # a CuPy array; else a NumPy one
    return ptr if ptr is not None else a.__array_interface__["data"][0]


class BufferNames:
    """The arena's name of a device view ("H[3]", "∂blocks.0.token_fc1.weight"), to say in a
    mismatch which buffer a kernel wrote; and host copies of read-only device buffers (the
    training set), so a check does not copy them back from the device at every launch."""

    def __init__(self, views: dict, params: dict | None = None, grads: dict | None = None):
        self._names, self._host = {}, {}
        for name, a in views.items():
            self._name(a, name)
            if a.ndim >= 2:
                for i in range(len(a)):
                    self._name(a[i], f"{name}[{i}]")
        for prefix, named in (("", params or {}), ("∂", grads or {})):
            for name, a in named.items():
                self._name(a, prefix + name)

    def _name(self, a, name: str) -> None:
        self._names.setdefault((_address(a), a.shape), name)

    def __call__(self, a) -> str:
        return self._names.get((_address(a), a.shape), "a buffer outside the arena")

    def keep_host_copy(self, device_array, host: np.ndarray) -> None:
        self._host[(_address(device_array), device_array.shape)] = np.asarray(host)

    def host_copy(self, device, a) -> np.ndarray:
        known = self._host.get((_address(a), a.shape))
        return known if known is not None else device.download(a)


def _where(at: tuple) -> str:
    def one(i):
        return f"{i.start}:{i.stop}" if isinstance(i, slice) else str(i)
    return f"[{', '.join(one(i) for i in at)}]" if at else ""


def run_against_twin(device, launch, twins: dict, names: BufferNames) -> dict[str, float]:
    """Launch with the twin of its kernel (by name, precision suffix dropped); returns output →
    largest error as a fraction of its bound. A product's outputs are held to its precision's
    tolerance; split-K counters must come back to zero."""
    kernel, precision = split_precision(launch.kernel)
    twin = twins[kernel]
    params = sources.signatures(sources.kernel_file(launch.kernel))[launch.kernel]
    args = {p.name: arg for p, arg in zip(params, launch.args)}
    a = {p.name: args[p.name].item() for p in params if p.kind != "pointer"}
    for name in twin.reads:
        host = names.host_copy(device, args[name])
        a[name] = host.astype(np.float64) if host.dtype.kind == "f" else host
    device.launch(launch)
    device.synchronize()
    worst = {}
    for name, out in twin.outputs(a).items():
        buffer = args[name]
        got = device.download(buffer[out.at] if out.at else buffer)
        label = f"{name} ({names(buffer)}{_where(out.at)})"
        tol = EXACT if out.terms == 0 else TOLERANCES[precision]
        worst[label] = compare(launch.kernel, label, got, out.want, out.terms, tol, out.term_norms)
    if "counters" in args and device.download(args["counters"]).any():
        raise KernelMismatch(f"{launch.kernel}: split-K counters ({names(args['counters'])}) not returned to zero")
    return worst


def check_step(launches, step: int, run_one: Callable, report: dict[str, dict[str, float]]) -> None:
    """Run a step's launches one at a time through `run_one(launch)` (→ output → error / bound), keeping
    the worst ratio per kernel and output in `report`; a mismatch is re-raised as one line that
    names the step and the launch's position in it."""
    for i, launch in enumerate(launches):
        try:
            worst = run_one(launch)
        except KernelMismatch as exc:
            raise KernelMismatch(f"check-kernels, step {step}, launch {i + 1} of {len(launches)}: {exc}") from None
        for tensor, ratio in worst.items():
            mine = report.setdefault(launch.kernel, {})
            mine[tensor] = max(mine.get(tensor, 0.0), ratio)
