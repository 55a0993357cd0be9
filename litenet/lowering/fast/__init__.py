"""The fast tier: rewrites over the reference program's regions (litenet.lowering.walk).

A rewrite looks at the region at hand and the ones right after it, decides whether it covers them —
the op pattern and the settings — and if so replaces their calls with faster kernels; the region
keeps its reference calls beside them (Region.reference), which `--check-kernels` holds the fast
calls to. Where no rewrite covers a region, its reference calls stay: a network or a setting no
rewrite knows still trains, at the reference tier's speed, and never silently differently.

The rewrites are tried in order, the first that covers a region wins:
  step.py     the loss (margin, cross-entropy, smoothed / CutMix), ‖g‖² and the update (clip + SGD,
              clip + AdamW), the data-parallel gradient average
  vectors.py  networks of vectors (the MLP): the embedding from the pixel rows, products with their
              GELU, residual + LayerNorm, the joins; geometry tiles (tall, wide, BF16 copies); the
              whole small-model step in 4 launches (fused_rows, fused_weight_grads)
  tokens.py   networks with patch tensors (the Mixer): the patches gathered with their augmentation,
              products with their GELU or residual, LayerNorm's backward with the join, GELU' in the
              ∂input products; split-K tiles; recompute
The tile choice itself is products.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from litenet.errors import UsageError
from litenet.graph import Op, consumers, ops_of
from litenet.lowering.branches import BRANCHES, side_branch
from litenet.lowering.fast import step, tokens, vectors
from litenet.lowering.fast.common import COUNTERS, SCRATCH
from litenet.lowering.fast.mlp_shape import mlp_shape
from litenet.lowering.fast.products import GeometryTiles, SplitTiles, Tiling
from litenet.lowering.program import Call, Program, Region
from litenet.lowering.walk import Walk

i32 = np.int32
TRAIN_BLOCKS_PER_SM = 3  # SplitTiles in training (docs/decisions.md, "Tile choice")


class Net:
    """What the rewrites share: the program being rewritten, its op list and readers, the tile policy,
    and the split-K scratch the chosen products need."""

    def __init__(self, program: Program, model, batch: int, prefix: str, precision: str, sm_count: int,
                 train=None, tiles=None):
        self.prog, self.model, self.B, self.prefix = program, model, batch, prefix
        self.w = Walk(model, batch, prefix, program)
        self.ops = ops_of(model)
        self.by_name = {op.name: op for op in self.ops}
        self.readers = consumers(self.ops)
        self.precision, self.sm_count, self.train = precision, sm_count, train
        self.tokens = any(op.tokens for op in self.ops)
        self.tiles = tiles or (SplitTiles(precision, sm_count, TRAIN_BLOCKS_PER_SM) if self.tokens
                               else GeometryTiles(precision, sm_count))
        self.scratch, self.counters = 1, 1
        # wide tiles for a patch network's channel products (tokens.tiling): None as geometry.choose_wide
        # chooses, True wherever a wide version exists, False never
        self.wide: bool | None = False
        self.copied: set[str] = set()  # BF16 copies a launch so far writes (tokens.bf16)
        self.params16 = False  # whether a product reads the parameters' BF16 copy (the update keeps it)

    def op(self, region: Region) -> Op | None:
        """The op a one-op region covers."""
        return self.by_name.get(region.ops[0]) if len(region.ops) == 1 else None

    def only_reader(self, name: str) -> Op | None:
        readers = self.readers.get(name, [])
        return readers[0] if len(readers) == 1 else None

    def splitk(self, t: Tiling) -> dict:
        """A product's split-K arguments, and its scratch and counters counted into the arena's."""
        self.scratch, self.counters = max(self.scratch, t.scratch), max(self.counters, t.counters)
        return dict(splits=i32(t.splits), scratch=SCRATCH, counters=COUNTERS)

    def product(self, name: str, t: Tiling, **named) -> Call:
        """A product kernel in the version `t` chose, with its split-K arguments."""
        return Call(t.kernel(name), t.grid, {**named, **self.splitk(t)})

    def finish(self, regions: list[Region]) -> Program:
        """The rewritten program: the placeholders bound to the scratch and counters tensors now sized."""
        scratch = self.prog.add(self.w.name("scratch"), (self.scratch,), life="state", purpose="split-K partial tiles")
        counters = self.prog.add(self.w.name("counters"), (self.counters,), np.uint32, life="state",
                                 purpose="split-K arrival counts, always left at zero")
        for region in regions:
            for call in region.calls:
                for k, v in call.args.items():
                    if v is SCRATCH:
                        call.args[k] = scratch
                    elif v is COUNTERS:
                        call.args[k] = counters
        return dataclasses.replace(self.prog, regions=regions)


def apply(net: Net, rules) -> list[Region]:
    """Each region through the first rule that covers it (and the regions after it it takes along)."""
    regions, out, i = net.prog.regions, [], 0
    while i < len(regions):
        for rule in rules:
            taken = rule(net, regions, i)
            if taken:
                count, new = taken
                out += new
                i += count
                break
        else:
            out.append(regions[i])
            i += 1
    return out


def rewrite_training(program: Program, model, train, batch: int, precision: str = "fp32", sm_count: int = 1,
                     **options) -> Program:
    """The training step in the fast tier (options: embed, plan, tall, wide — vectors.py, products.py;
    branches — ../branches.py)."""
    branch = options.get("branches", "on")
    if branch not in BRANCHES:
        raise ValueError(f"branches must be one of {', '.join(BRANCHES)}; got {branch!r}")
    net = Net(program, model, batch, "", precision, sm_count, train,
              _tiles(model, precision, sm_count, options, TRAIN_BLOCKS_PER_SM))
    if net.tokens:
        net.wide = options.get("wide")
    fused = vectors.fused_step(net, options.get("plan", "auto"), options.get("embed", "auto"))
    regions = fused if fused is not None else apply(net, step.RULES + (tokens.RULES if net.tokens else vectors.RULES)
                                                   + vectors.embed_rules(options.get("embed", "auto")))
    if net.tokens:
        regions = tokens.fuse_copies(regions)
    if train.activations == "recompute":
        regions = tokens.recompute(net, regions)
    if net.tokens:
        regions = tokens.drop_unread(regions)
    out = net.finish(regions)
    vectors.finish_copies(net, out)
    if branch == "on":
        out = side_branch(out)
    mlp = mlp_shape(net)
    out.geometry = mlp.geometry if mlp else None
    out.labels.update(batch=batch, tier="fast", tiles=net.tiles.name, precision=precision,
                      plan="fused" if fused is not None else "ops")
    return out


def rewrite_forward(program: Program, model, batch: int, prefix: str, precision: str = "fp32", sm_count: int = 1,
                    blocks_per_sm: int = TRAIN_BLOCKS_PER_SM, **options) -> Program:
    """A forward pass in the fast tier (evaluation; inference with `blocks_per_sm` 2)."""
    net = Net(program, model, batch, prefix, precision, sm_count,
              tiles=_tiles(model, precision, sm_count, options, blocks_per_sm))
    if net.tokens:
        net.wide = options.get("wide")
    regions = apply(net, (tokens.RULES if net.tokens else vectors.RULES) + vectors.embed_rules(options.get("embed", "auto")))
    if net.tokens:  # the channel products as the step runs them, and no fp32 output that nothing reads
        regions = tokens.drop_unread(tokens.fuse_copies(regions))
    out = net.finish(regions)
    vectors.finish_copies(net, out)
    out.labels.update(batch=batch, tier="fast", tiles=net.tiles.name, precision=precision)
    return out


def _tiles(model, precision: str, sm_count: int, options: dict, blocks_per_sm: int):
    if any(op.tokens for op in ops_of(model)):
        if options.get("tall"):
            raise UsageError("tall tiles are for networks of vectors; a network with patch tensors takes 64 × 64 "
                             "tiles and, for its channel products, wide ones (wide=False keeps 64 × 64)")
        return SplitTiles(precision, sm_count, blocks_per_sm)
    return GeometryTiles(precision, sm_count, options.get("tall"), options.get("wide"))
