"""One device allocation for every tensor of a lowered network, placed by liveness.

State tensors (parameters, moments, schedule, statistics) get bytes of their own. A step tensor lives
from the first to the last call that names it; two step tensors whose lives do not overlap may share
bytes. A call on the captured graph's second stream (branches.py) may still be running while the calls
listed after it run, up to the join at the end of its program, so what it touches lives until then:
the waits between the streams then follow the data alone, not bytes handed from one tensor to the
next. Not in a program that recomputes activations (which asks for memory before time): holding them
there would keep every recomputed block's activations to the step's end, all that recompute saves, so
its bytes pass on as soon as the list allows and the main stream waits for the ∂W launch that last
read them. Several programs share one arena when they never run at once (a training step and the forward
pass of evaluation take turns on one stream): their calls are laid end to end on one timeline.
Placement is first fit, largest tensor first, each tensor at the lowest offset no live neighbour
holds — the classic greedy for interval colouring, within a few per cent of the peak live bytes here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from litenet.gpu.launch import Launch
from litenet.lowering.program import Call, Program, Ref, Tensor

ALIGN = 256  # bytes: every tensor starts aligned for 16-byte vector loads and coalesced access


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Arena:
    """Where each tensor lives in one allocation of `size` bytes."""

    tensors: dict[str, Tensor]
    offsets: dict[str, int]
    size: int
    state_bytes: int

    @classmethod
    def plan(cls, *programs: Program) -> "Arena":
        tensors: dict[str, Tensor] = {}
        for program in programs:
            for name, t in program.tensors.items():
                if tensors.setdefault(name, t) != t:
                    raise ValueError(f"tensor {name} differs between the programs sharing an arena")
        first, last, clock = {}, {}, 0
        for program in programs:
            calls = program.calls()
            end = clock + len(calls) - 1
            hold_second_stream = not any(r.phase == "recompute" for r in program.regions)
            for call in calls:
                # a call on the second stream may still run when the calls after it in the list do:
                # what it touches lives until its program ends (the streams join there)
                until = end if call.stream and hold_second_stream else clock
                for name in call.tensors():
                    first.setdefault(name, clock)
                    last[name] = max(last.get(name, clock), until)
                clock += 1
        offsets, size = {}, 0
        for t in tensors.values():
            if t.life == "state":
                offsets[t.name] = size
                size += _aligned(t.nbytes)
        state_bytes = size
        placed: list[tuple[int, int, int, int]] = []  # (start, end, first, last)
        steps = [t for t in tensors.values() if t.life == "step" and t.name in first]
        for t in sorted(steps, key=lambda t: (-t.nbytes, first[t.name])):
            need, lo, hi = _aligned(t.nbytes), first[t.name], last[t.name]
            busy = sorted((s, e) for s, e, f, l in placed if f <= hi and lo <= l)
            at = state_bytes
            for s, e in busy:
                if at + need <= s:
                    break
                at = max(at, e)
            offsets[t.name] = at
            placed.append((at, at + need, lo, hi))
            size = max(size, at + need)
        return cls(tensors, offsets, size, state_bytes)

    def allocate(self, xp):
        """One zeroed allocation; returns tensor name → typed view (external tensors are not in it)."""
        raw = xp.zeros(max(self.size, ALIGN), dtype=np.uint8)
        views = {"_raw": raw}
        for name, off in self.offsets.items():
            t = self.tensors[name]
            views[name] = raw[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
        return views

    def table(self) -> str:
        """The placement as a Markdown table (memory_report)."""
        lines = ["| tensor | shape | dtype | bytes | offset | life |", "|---|---|---|---|---|---|"]
        for name in sorted(self.offsets, key=self.offsets.get):
            t = self.tensors[name]
            lines.append(f"| {name} | {t.shape} | {t.dtype.name} | {t.nbytes:,} | {self.offsets[name]:,} | {t.life} |")
        lines.append(f"| **arena** | | | **{self.size:,}** | | state {self.state_bytes:,} |")
        return "\n".join(lines)


def view(views: dict, ref: Ref):
    """The device array a Ref names."""
    whole = views[ref.tensor]
    return whole.reshape(-1)[ref.offset:ref.offset + ref.size].reshape(ref.shape)


def bind(call: Call, views: dict) -> Launch:
    """The call as a Launch over the allocated views (and external arrays in `views`)."""
    args = tuple(view(views, a) if isinstance(a, Ref) else a for a in call.ordered_args())
    return Launch(call.kernel, call.grid, args, call.shared, stream=call.stream)
