"""What an op computes, for the inspector: its forward and backward formulas (`litenet trace`'s) and the
lines of litenet.ops that compute them, read from the source that trains the network."""

from __future__ import annotations

import functools
import inspect
import re
from pathlib import Path

from litenet import forward, ops
from litenet.graph import KINDS, Op
from litenet.insight.trace import BACKWARD, FORWARD
from litenet.train import network

PACKAGE_ROOT = Path(ops.__file__).resolve().parents[1]
# The two steps that are one line of a dispatch table rather than a function of litenet.ops
TABLE_ENTRIES = {"x + v": (forward, "STEPS"), "network.BACKWARD": (network, "BACKWARD")}


def describe(op: Op) -> dict:
    """The op's kind, what it is, its formulas both ways and the source of each."""
    what, formula, forward_fn = FORWARD[op.kind]
    backward_formula, backward_fn = BACKWARD[op.kind]
    return {"kind": op.kind, "what": what, "kind_doc": KINDS[op.kind],
            "forward": {"formula": formula(op) if callable(formula) else formula, "function": forward_fn,
                        "source": source(forward_fn, op.kind)},
            "backward": {"formula": backward_formula, "function": backward_fn, "source": source(backward_fn, op.kind)}}


@functools.lru_cache(maxsize=64)
def source(function: str, kind: str) -> list[dict]:
    """The source of a step as [{file, start, lines}]: the litenet.ops function and the private helpers it
    calls (GELU's in-place loops), or the dispatch table's line for the residual join."""
    if function in TABLE_ENTRIES:
        module, table = TABLE_ENTRIES[function]
        lines, start = inspect.getsourcelines(module)
        at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f'"{kind}":') and i > _line_of(lines, table))
        return [_block(module, lines[at:at + 1], start + at)]
    fn = getattr(ops, function.removeprefix("ops."))
    out = [_of(fn)]
    for helper in dict.fromkeys(re.findall(r"\b(_[a-z]\w*)\b", "".join(out[0]["lines"]))):
        if inspect.isfunction(getattr(ops, helper, None)):
            out.append(_of(getattr(ops, helper)))
    return out


def _line_of(lines: list[str], table: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(f"{table} = "))


def _of(fn) -> dict:
    lines, start = inspect.getsourcelines(fn)
    return _block(inspect.getmodule(fn), lines, start)


def _block(module, lines: list[str], start: int) -> dict:
    path = Path(inspect.getsourcefile(module)).resolve()
    return {"file": path.relative_to(PACKAGE_ROOT).as_posix(), "start": start, "lines": [line.rstrip("\n") for line in lines]}
