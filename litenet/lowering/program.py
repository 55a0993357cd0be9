"""What a lowered network is: named tensors, kernel calls that name the tensors they take, and the
calls grouped into regions — one op's forward or backward, the loss, the update — each remembering
the reference calls it stands for.

A call's pointer arguments are `Ref`s (a contiguous view of a named tensor: its offset and shape),
not device arrays: the arena (arena.py) places the tensors once every call is known — tensors whose
lifetimes never overlap share bytes — and only then are the calls bound to views of one allocation.
Which tensors a call reads and writes is read off its kernel's declaration (`const` pointers are
read), so liveness needs no list written by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from litenet.gpu import sources

# A tensor's lifetime: "step" tensors live from their first to their last call and share the arena's
# bytes by liveness; "state" tensors (parameters, moments, the schedule, statistics) live as long as
# the backend; "external" tensors (the training set) are device arrays made elsewhere.
LIVES = ("step", "state", "external")


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    life: str = "step"
    purpose: str = ""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Ref:
    """A C-contiguous view of tensor `tensor`: `shape` from element `offset`. Indexing the first axis
    and reshaping give Refs, so code that builds calls reads like code over arrays."""

    tensor: str
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @classmethod
    def whole(cls, t: Tensor) -> "Ref":
        return cls(t.name, 0, tuple(t.shape), np.dtype(t.dtype))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> "Ref":
        row = math.prod(self.shape[1:])
        if isinstance(key, (int, np.integer)):
            index = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= index < self.shape[0]:
                raise IndexError(f"{self.tensor}: row {key} of {self.shape[0]}")
            return Ref(self.tensor, self.offset + index * row, self.shape[1:], self.dtype)
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.shape[0])
            return Ref(self.tensor, self.offset + start * row, (max(stop - start, 0), *self.shape[1:]), self.dtype)
        raise TypeError(f"a Ref takes an index or a contiguous slice of its first axis, not {key!r}")

    def reshape(self, *shape) -> "Ref":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"{self.tensor}: cannot view {self.shape} as {shape}")
        return Ref(self.tensor, self.offset, shape, self.dtype)

    def __repr__(self) -> str:
        whole = self.offset == 0
        return f"{self.tensor}{'' if whole else f'+{self.offset}'}{list(self.shape)}"


@dataclass
class Call:
    """One kernel launch: `grid` blocks of 256 threads, arguments by parameter name (Refs for pointers,
    np.int32 / np.float32 scalars), `shared` bytes of dynamic shared memory. `terms`: how many rounded
    terms stand behind each output (pointer parameter name → count), for check tolerances. `stream`:
    1 where a captured graph may run it on the second stream (branches.py), else 0."""

    kernel: str
    grid: int
    args: dict
    shared: int = 0
    terms: dict = field(default_factory=dict)
    stream: int = 0

    def params(self):
        return sources.signatures(sources.kernel_file(self.kernel))[self.kernel]

    def reads(self) -> list[str]:
        """Parameter names the kernel reads through (every pointer: a written buffer may be read too)."""
        return [p.name for p in self.params() if p.kind == "pointer"]

    def writes(self) -> list[str]:
        """Parameter names of the pointers the kernel may write (not `const`)."""
        return [p.name for p in self.params() if p.kind == "pointer" and not p.const]

    def tensors(self) -> set[str]:
        return {v.tensor for v in self.args.values() if isinstance(v, Ref)}

    def ordered_args(self) -> tuple:
        """The arguments in the kernel's parameter order (a missing or unknown name is a TypeError)."""
        names = [p.name for p in self.params()]
        missing, unknown = [n for n in names if n not in self.args], [n for n in self.args if n not in names]
        if missing or unknown:
            raise TypeError(f"{self.kernel}: missing {missing}, not its parameters {unknown}")
        return tuple(self.args[n] for n in names)


@dataclass
class Region:
    """The calls that compute one part of a step: `ops` (the op names it covers) in `phase` ("input",
    "forward", "loss", "join", "backward", "norm", "update"). `reference` holds the reference tier's calls
    for the same work; `rewrite` names the fast rewrite that produced `calls` (None: they are the
    reference's)."""

    name: str
    phase: str
    ops: tuple[str, ...]
    calls: list[Call]
    reference: list[Call] = field(default_factory=list)
    rewrite: str | None = None

    @property
    def is_reference(self) -> bool:
        return self.rewrite is None


@dataclass
class Program:
    """A lowered step (or forward pass): its tensors and its regions, in launch order."""

    tensors: dict[str, Tensor]
    regions: list[Region]
    labels: dict = field(default_factory=dict)  # facts a reader of the launch list wants (batch, tier…)
    constants: dict = field(default_factory=dict)  # state tensor → host values uploaded once (tables)
    refresh: list[Call] = field(default_factory=list)  # calls that remake copies of the parameters after an upload
    allreduce_at: int | None = None  # data-parallel: the gradient is summed over the ranks before this call
    geometry: object = None  # the fast tier's MLP tile geometry (fast/geometry.py), where it chose one
    outputs: dict = field(default_factory=dict)  # op → the tensor holding its output, where not the op's own name

    def calls(self) -> list[Call]:
        return [c for r in self.regions for c in r.calls]

    def add(self, name: str, shape, dtype=np.float32, life: str = "step", purpose: str = "") -> Ref:
        """Declare a tensor (or return the existing one's Ref, whose shape and dtype must agree)."""
        t = Tensor(name, tuple(int(s) for s in shape), np.dtype(dtype), life, purpose)
        old = self.tensors.get(name)
        if old is not None and (old.shape, old.dtype) != (t.shape, t.dtype):
            raise ValueError(f"tensor {name} declared as {old.shape} {old.dtype} and as {t.shape} {t.dtype}")
        self.tensors.setdefault(name, t)
        return Ref.whole(self.tensors[name])

    def ref(self, name: str) -> Ref:
        return Ref.whole(self.tensors[name])

    def describe(self) -> str:
        """The launch list, op → kernel, one line a launch (`--print-launches`)."""
        lines = [f"# {', '.join(f'{k} {v}' for k, v in self.labels.items())}" if self.labels else ""]
        for region in self.regions:
            tier = f"fast: {region.rewrite}" if region.rewrite else "reference"
            lines.append(f"{region.name}  [{region.phase}, {tier}]")
            for call in region.calls:
                refs = ", ".join(f"{k}={v!r}" for k, v in call.args.items() if isinstance(v, Ref))
                lines.append(f"    {call.kernel}<<<{call.grid}>>>  {refs}")
        return "\n".join(line for line in lines if line)
