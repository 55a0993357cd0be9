"""`--check-kernels N`: the first N steps run region by region, each held to what it stands for.

A reference call is held to its NumPy twin (twins.py): the values of its arguments are copied to the
host before it runs, the twin recomputes its outputs in float64, and every output must lie within
the computed tolerance. A fast region is held to its reference calls: the tensors those read are
copied into a second arena (the reference calls' own), the fast calls run in the training arena and
the reference calls — each held to its twin — in the second, and every tensor both wrote must agree
within the tolerance of the fast region's precision. Training then goes on from the fast results.

Tolerances are computed, not tuned (docs/conventions.md): a value that is a sum of n rounded terms may
differ by atol + rtol·|want|, rtol = safety · u · √n (u the unit roundoff of the dtype that rounded
them; √n the typical growth of rounding error in a sum), atol = rtol · max|want| — which also covers
values where large terms cancel to a small sum. Where a whole output cancels by design (a gradient
the LayerNorm after it makes nearly zero, such as a token product's bias gradient), max|want| is
itself rounding noise; a check may then give each value's ‖terms‖₂, the size of the rounded products
behind it, and atol = rtol · max(max|want|, max‖terms‖₂) — for terms of random sign ‖terms‖₂ ≈ |want|,
so the rule only widens where the terms cancel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from litenet.lowering.arena import Arena, bind, view
from litenet.lowering.program import Program, Ref, Region
from litenet.train.twins import TWINS


class KernelMismatch(AssertionError):
    """A kernel's output differs from its twin or its reference beyond the computed tolerance (a bug)."""


@dataclass(frozen=True)
class Tolerance:
    unit: float  # the unit roundoff of the dtype that rounded the terms
    safety: float  # headroom over the typical √n growth

    def bounds(self, terms: int, want: np.ndarray, term_norms=None) -> tuple[float, float]:
        rtol = self.safety * self.unit * math.sqrt(max(terms, 1))
        scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
        if term_norms is not None and np.size(term_norms):
            scale = max(scale, float(np.max(term_norms)))
        return rtol * scale, rtol


# float32 kernels against float64 twins: the GPU's tanhf/expf are within 2 ulp and the compiler may fuse
# a·b + c into one rounding or not; 16·√n covers both without hiding a real bug (a wrong index or a
# missed term is off by O(1), not by 1e-6). Tensor-core products round both operands first: TF32 keeps
# 10 mantissa bits, BF16 7, and that rounding (about 2u a product, random signs) dominates: 4·√n.
FLOAT32 = Tolerance(unit=2.0 ** -24, safety=16.0)
TF32 = Tolerance(unit=2.0 ** -11, safety=4.0)
BF16 = Tolerance(unit=2.0 ** -8, safety=4.0)
TOLERANCES = {"fp32": FLOAT32, "tf32": TF32, "bf16": BF16}


EXACT = Tolerance(unit=0.0, safety=0.0)  # integers and counters: no rounding stands behind them


def compare(kernel: str, tensor: str, got, want, terms: int, tol: Tolerance = FLOAT32, term_norms=None) -> float:
    """Raise KernelMismatch unless got ≈ want (`tensor` of `kernel`); returns the largest error as a fraction
    of its bound. `term_norms`: ‖terms‖₂ of each value, for sums that may cancel (module docstring)."""
    what = f"{kernel}: {tensor}"
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.size == want.size:
        got = got.reshape(want.shape)
    else:
        raise KernelMismatch(f"{what}: {got.size} values, its reference {want.size}")
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(got))[0])
        raise KernelMismatch(f"{what}: holds {got[bad]} at {bad}; its reference is finite")
    atol, rtol = tol.bounds(terms, want, term_norms)
    allowed = atol + rtol * np.abs(want)
    err = np.abs(got - want)
    ratio = err / np.maximum(allowed, np.finfo(np.float64).tiny)
    if np.size(ratio) and np.max(ratio) > 1.0:
        at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        raise KernelMismatch(
            f"{what} differs, worst at {tuple(int(i) for i in at)}: got {got[at]:.9g}, want {want[at]:.9g}, "
            f"|error| {err[at]:.3g} > tolerance {allowed[at]:.3g} (= {atol:.3g} + {rtol:.3g}·|want| for sums of "
            f"{terms} terms)")
    return float(np.max(ratio)) if np.size(ratio) else 0.0


def _host(device, views, ref: Ref, host_copies: dict) -> np.ndarray:
    if ref.tensor in host_copies:  # the training set (external, whole): the host's copy, not the device's each launch
        return host_copies[ref.tensor]
    a = device.download(view(views, ref))
    with np.errstate(invalid="ignore"):  # an output not yet written may hold any bits
        return a.astype(np.float64) if a.dtype.kind == "f" else a


def run_reference(device, views, call, host_copies: dict, terms: dict | None = None) -> dict[str, float]:
    """Launch a reference call and hold it to its twin; returns output → error / bound. `terms`, when
    given, receives the most rounded terms behind any value of each tensor the call wrote."""
    before = {}
    for p in call.params():
        arg = call.args[p.name]
        before[p.name] = _host(device, views, arg, host_copies) if isinstance(arg, Ref) else arg.item()
    device.launch(bind(call, views))
    device.synchronize()
    worst = {}
    for name, (want, count, *norms) in TWINS[call.kernel](before).items():
        got = _host(device, views, call.args[name], host_copies)
        worst[f"{call.kernel}.{name}"] = compare(call.kernel, f"{name} ({call.args[name]!r}) against its NumPy twin",
                                                 got, want, count, FLOAT32, norms[0] if norms else None)
        if terms is not None:
            tensor = call.args[name].tensor
            terms[tensor] = max(terms.get(tensor, 1), count)
    return worst


class RegionChecker:
    """Runs steps region by region with the checks of the module docstring; `report` keeps the worst
    error / bound of every kernel output and region."""

    def __init__(self, device, program: Program, views: dict, host_set, model, train):
        self.dev, self.program, self.views = device, program, views
        self.host = {"dataset.images": host_set[0], "dataset.labels": host_set[1]}
        shadow = Program(program.tensors, [Region(r.name, r.phase, r.ops, r.reference) for r in program.regions])
        self.shadow_arena = Arena.plan(shadow)
        # where each tensor is last read in the reference calls: one a region reads no more after it is its own
        clock, self.last_use, self.region_end = 0, {}, []
        for region in shadow.regions:
            for call in region.calls:
                for name in call.tensors():
                    self.last_use[name] = clock
                clock += 1
            self.region_end.append(clock - 1)
        self.shadow = device.allocate(self.shadow_arena)
        self.shadow.update({k: views[k] for k in self.host})
        self.precision = program.labels.get("precision", "fp32")
        # tensors any fast call writes: an input no fast call writes is read from its BF16 copy (_upload_input)
        self.fast_writes = {call.args[p].tensor for r in program.regions for call in r.calls for p in call.writes()}

    def step(self, index: int, report: dict, allreduce=None) -> None:
        """One step; `allreduce()` sums the gradient over the ranks where a data-parallel step does."""
        calls = sum(len(r.calls) for r in self.program.regions)
        done = 0
        for index_of_region, region in enumerate(self.program.regions):
            if done == self.program.allreduce_at:
                allreduce()
            try:
                worst = self._reference(region) if region.is_reference else self._fast(region, index_of_region)
            except KernelMismatch as exc:
                raise KernelMismatch(f"check-kernels, step {index}, region {region.name!r} (launches {done + 1}–"
                                     f"{done + len(region.calls)} of {calls}): {exc}") from None
            for key, ratio in worst.items():
                report[key] = max(report.get(key, 0.0), ratio)
            done += len(region.calls)

    def _reference(self, region: Region) -> dict[str, float]:
        worst = {}
        for call in region.calls:
            worst.update(run_reference(self.dev, self.views, call, self.host))
        return worst

    def _fast(self, region: Region, at: int) -> dict[str, float]:
        written_fast = {call.args[p].tensor for call in region.calls for p in call.writes()}
        for name in self._inputs(region):
            self._upload_input(name, region)
        for call in region.calls:
            self.dev.launch(bind(call, self.views))
        self.dev.synchronize()
        worst, terms = {}, {}
        for call in region.reference:
            worst.update(run_reference(self.dev, self.shadow, call, self.host, terms))
        tol = self._tolerance(region)
        for tensor, count in terms.items():  # every tensor both wrote, whole (both started from the same values)
            source = self._source(tensor, region)
            if source is None or (source not in written_fast and tensor not in written_fast):
                continue  # the fast region keeps this one to itself (or never makes it)
            if self.program.tensors[tensor].life == "step" and self.last_use[tensor] <= self.region_end[at]:
                continue  # read only inside the region: the reference may already have reused its bytes
            got, want = self.dev.download(self.views[source]), self.dev.download(self.shadow[tensor])
            worst[f"{region.rewrite}: {tensor}"] = compare(f"fast region {region.rewrite!r}",
                                                           f"{tensor} against its reference calls", got, want, count, tol)
        return worst

    def _inputs(self, region: Region) -> list[str]:
        """The tensors the region's reference calls read before they write them: read-only arguments, and
        the state a kernel updates in place (parameters, moments, statistics). A step tensor the region
        writes is its output, never copied in: its bytes in the second arena may be another input's."""
        written, inputs = set(), []
        for call in region.reference:
            for p in call.params():
                ref = call.args[p.name]
                if p.kind != "pointer" or ref.tensor in written or ref.tensor in inputs or ref.tensor in self.host:
                    continue
                if p.const or self.program.tensors[ref.tensor].life == "state":
                    inputs.append(ref.tensor)
            written |= {call.args[p].tensor for p in call.writes()}
        return inputs

    def _upload_input(self, name: str, region: Region) -> None:
        """The training arena's value of input `name` into the shadow; where the fast program keeps it only as
        its BF16 copy (tokens.drop_unread), the copy's values, widened to fp32 exactly."""
        source, copy = self._source(name, region), self._source(name + ".bf16", region)
        if source is not None and source not in self.fast_writes and copy in self.fast_writes:
            bits = self.dev.download(self.views[copy]).astype(np.uint32) << 16
            self.dev.upload(self.shadow[name], bits.view(np.float32))
        elif source is not None:
            self.dev.upload(self.shadow[name], self.dev.download(self.views[source]))

    def _source(self, name: str, region: Region) -> str | None:
        """The training arena's tensor that holds what the reference calls call `name` (in a recomputed
        network's forward, its "…/fwd" copy), or None where there is none."""
        if region.phase == "forward" and name + "/fwd" in self.views:
            return name + "/fwd"
        return name if name in self.views else None

    def _tolerance(self, region: Region) -> Tolerance:
        for call in region.calls:
            for precision in ("tf32", "bf16"):
                if precision in call.kernel:
                    return TOLERANCES[precision]
        return FLOAT32
