"""`check_kernels`: run a step launch by launch and hold every kernel's output to its NumPy twin.

Each launch carries a `Check`: the buffers it reads (copied to the host before it runs), the
buffers it writes (copied after), and its twin, which recomputes the outputs in float64 from the
copied inputs with the functions of litenet.train.reference. The first output outside its
tolerance raises `KernelMismatch`, naming the kernel and the tensor.

Tolerances are computed, not tuned (CONVENTIONS.md): a value that is a sum of n rounded float32
terms is allowed |got − want| ≤ atol + rtol·|want| with rtol = safety · u · √n (u = 2⁻²⁴, the
unit roundoff; √n is the typical growth of rounding error in a sum) and atol = rtol · max|want|,
which covers outputs where large terms cancel to a small sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class KernelMismatch(AssertionError):
    """A kernel's output differs from its NumPy twin beyond the computed tolerance (an internal bug)."""


@dataclass(frozen=True)
class Tolerance:
    unit: float  # the dtype's unit roundoff
    safety: float  # headroom over the typical √n growth

    def bounds(self, terms: int, want: np.ndarray) -> tuple[float, float]:
        rtol = self.safety * self.unit * math.sqrt(max(terms, 1))
        scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
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
TOLERANCES = {"fp32": FLOAT32, "tf32": TF32, "bf16": BF16}


def compare(kernel: str, tensor: str, got, want, terms: int, tol: Tolerance = FLOAT32) -> float:
    """Raise KernelMismatch unless got ≈ want; returns the largest error relative to the bound."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        got = got.reshape(want.shape) if got.size == want.size else got
    if got.shape != want.shape:
        raise KernelMismatch(f"{kernel}: {tensor} has shape {got.shape}, its twin {want.shape}")
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        bad = np.argwhere(~np.isfinite(got))[0]
        raise KernelMismatch(f"{kernel}: {tensor} holds {got[tuple(bad)]} at {tuple(bad)}; its twin is finite")
    atol, rtol = tol.bounds(terms, want)
    allowed = atol + rtol * np.abs(want)
    err = np.abs(got - want)
    ratio = err / np.maximum(allowed, np.finfo(np.float64).tiny)
    if np.size(ratio) and np.max(ratio) > 1.0:
        at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        raise KernelMismatch(
            f"{kernel}: {tensor} differs from its NumPy twin at {tuple(int(i) for i in at)}: "
            f"kernel {got[at]:.9g}, twin {want[at]:.9g} (|error| {err[at]:.3g}, allowed {atol:.3g} + "
            f"{rtol:.3g}·|twin| for sums of {terms} terms)")
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


def _resolve(view: View, pos: int):
    return view(pos) if callable(view) else view


def _host(device, view, pos: int) -> np.ndarray:
    a = device.download(_resolve(view, pos))
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def run_checked(device, launch, pos: int) -> dict[str, float]:
    """Launch with its check; returns output → largest error as a fraction of its bound."""
    check = launch.check
    inputs = {k: _host(device, v, pos) for k, v in check.reads.items()}
    device.launch(launch)
    device.synchronize()
    got = {k: _host(device, v, pos) for k, v in check.writes.items()}
    want = check.twin(inputs, pos)
    return {k: compare(launch.kernel, k, got[k], w, check.terms.get(k, 1), check.tol) for k, w in want.items()}
