"""A captured step on two streams: which launch must wait for which.

A step is a list of launches, correct when run in list order. The lowering may put some of them on a
second stream (Launch.stream 1, litenet/lowering/branches.py) so they run beside the others. Running
the two streams side by side gives the same bits as the list order when every two launches on
different streams that touch the same bytes — one writes what the other reads or writes — keep their
list order; launches on one stream keep it anyway. `waits` finds, for each launch, the last launch on
the other stream it must follow; the device records an event after that one and makes the later
launch's stream wait for it. Bytes, not tensor names: the arena lets tensors whose lives do not meet
share bytes, and a second stream stretches a life past its last launch in list order.

`run_order` gives an order a GPU could run the two streams in, the second one as late (or as early)
as the waits allow: the CPU emulator replays graphs that way, so a missing wait shows up as changed
bits in the tests.
"""

from __future__ import annotations

from litenet.gpu import sources

Span = tuple[int, int]  # [start, end) in bytes of one address space


def address(array) -> int:
    """Where an array's first byte lies: a CuPy array's device pointer, a NumPy array's host pointer."""
    data = array.data
    return int(data.ptr) if hasattr(data, "ptr") else int(array.ctypes.data)


def accesses(launch) -> tuple[list[Span], list[Span]]:
    """The byte spans a launch reads and writes: every pointer may be read, the non-`const` ones written
    (the kernel's declaration says which)."""
    params = sources.signatures(sources.kernel_file(launch.kernel))[launch.kernel]
    reads, writes = [], []
    for p, arg in zip(params, launch.args):
        if p.kind != "pointer" or arg.nbytes == 0:
            continue
        span = (address(arg), address(arg) + arg.nbytes)
        reads.append(span)
        if not p.const:
            writes.append(span)
    return reads, writes


def _meet(a: list[Span], b: list[Span]) -> bool:
    return any(s < f and t < e for s, e in a for t, f in b)


def _conflict(first: tuple[list[Span], list[Span]], second: tuple[list[Span], list[Span]]) -> bool:
    (r1, w1), (r2, w2) = first, second
    return _meet(w1, r2) or _meet(r1, w2)


def waits(streams: list[int], touched: list[tuple[list[Span], list[Span]]]) -> list[int | None]:
    """For launch j on stream s: the index of the last launch before it on the other stream that touches
    its bytes, or None where there is none it has not already waited for (waiting for launch i covers
    every launch before i on i's stream)."""
    out: list[int | None] = []
    waited = {0: -1, 1: -1}  # per stream: the last index on the other stream it has waited for
    on: dict[int, list[int]] = {0: [], 1: []}
    for j, s in enumerate(streams):
        need = None
        for i in reversed(on[1 - s]):
            if i <= waited[s]:
                break
            if _conflict(touched[i], touched[j]):
                need = waited[s] = i
                break
        out.append(need)
        on[s].append(j)
    return out


def schedule(launches) -> tuple[list[int], list[int | None]]:
    """Each launch's stream, and the launch on the other stream it must follow (`waits`; None: none)."""
    lanes = [launch.stream for launch in launches]
    if not any(lanes):
        return lanes, [None] * len(lanes)
    return lanes, waits(lanes, [accesses(launch) for launch in launches])


def run_order(streams: list[int], after: list[int | None], second_late: bool = True) -> list[int]:
    """The launches in an order the two streams may run in: each stream in list order, each launch after
    the one it waits for, and the second stream's next launch taken as late (or as early) as that allows."""
    queues = {s: [j for j, t in enumerate(streams) if t == s] for s in (0, 1)}
    done, order = set(), []
    first, then = (0, 1) if second_late else (1, 0)
    while queues[0] or queues[1]:
        for s in (first, then):
            if queues[s] and (after[queues[s][0]] is None or after[queues[s][0]] in done):
                j = queues[s].pop(0)
                done.add(j)
                order.append(j)
                break
        else:
            raise RuntimeError("the two streams wait for each other: a wait points forward in the list")
    return order
