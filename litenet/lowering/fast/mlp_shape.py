"""The MLP's shape in an op list (pixel_rows → embedding → blocks → head), its tile geometry, and the BF16
copies its wide BF16 products read: what the rewrites for networks of vectors and the update share.

BF16 copies (kernels/bf16_copy.cu): a wide BF16 product reads BF16 copies of its operands, written by the
kernel that produces the operand (or a bf16_copy launch). Copies exist per group, as the products of an
MLP-shaped network read them (COPIES); networks of vectors of another shape run no wide BF16 product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from litenet.graph import Op
from litenet.lowering.fast.geometry import Geometry
from litenet.lowering.program import Call, Ref

i32 = np.int32

# Each BF16 copy group and the products that read it (a copy exists where one of them is wide BF16).
COPIES = {
    "P16": ("embed_forward", "fc1_forward", "fc2_forward", "head_forward", "head_backward_input",
            "fc2_backward_input", "fc1_backward_input"),
    "S16": ("embed_forward", "embed_backward"),
    "X16": ("embed_forward", "fc1_forward", "fc1_backward_weight", "head_forward", "head_backward_weight"),
    "A16": ("fc1_forward", "fc2_forward", "fc2_backward_weight"),
    "G16": ("head_backward_weight", "head_backward_input", "fc2_backward_weight", "fc2_backward_input",
            "embed_backward"),
    "GH16": ("fc2_backward_input", "fc1_backward_weight", "fc1_backward_input"),
}


@dataclass
class MlpShape:
    """An op list of the MLP's shape: pixel_rows → linear (no bias) → blocks of [linear → gelu → linear →
    residual (skip: the block's input) → layernorm] → linear head; its geometry and BF16 copy groups."""

    rows: Op
    embed: Op
    blocks: list[tuple[Op, Op, Op, Op, Op]]
    head: Op
    geometry: Geometry
    copies: set[str]

    def block_of(self, op_name: str) -> int | None:
        return next((i for i, b in enumerate(self.blocks) if any(o.name == op_name for o in b)), None)


def mlp_shape(net) -> MlpShape | None:
    """The network as an MlpShape, or None (cached on `net`)."""
    if hasattr(net, "_mlp"):
        return net._mlp
    net._mlp = None
    ops = net.ops
    if len(ops) < 3 or ops[0].kind != "pixel_rows" or ops[1].kind != "linear" or ops[1].param("bias"):
        return None
    blocks, k, x = [], 2, ops[1]
    while k + 5 <= len(ops) - 1:
        fc1, gelu, fc2, res, ln = ops[k:k + 5]
        if not (fc1.kind == "linear" and fc1.inputs == (x.name,) and gelu.kind == "gelu" and gelu.inputs == (fc1.name,)
                and fc2.kind == "linear" and fc2.inputs == (gelu.name,) and res.kind == "residual"
                and res.inputs == (x.name, fc2.name) and ln.kind == "layernorm" and ln.inputs == (res.name,)):
            return None
        blocks.append((fc1, gelu, fc2, res, ln))
        k, x = k + 5, ln
    head = ops[-1]
    if k != len(ops) - 1 or head.kind != "linear" or head.inputs != (x.name,) or not head.param("bias"):
        return None
    d = ops[1].shape[0]
    hidden = blocks[0][0].shape[0] if blocks else 1
    if any(b[0].shape[0] != hidden or b[4].shape[0] != d for b in blocks):
        return None
    shape = SimpleNamespace(width=d, hidden=hidden, classes=head.shape[0], blocks=len(blocks),
                            embed_inputs=ops[0].shape[0], embed=ops[0].attrs["embed"])
    t = net.tiles
    geometry = Geometry(shape, net.B, net.sm_count, "auto", t.tall, net.precision, t.wide)
    copies = {group for group, readers in COPIES.items() if any(geometry.gemms[r].reads_bf16 for r in readers)}
    net._mlp = MlpShape(ops[0], ops[1], blocks, head, geometry, copies)
    return net._mlp


# -- the pieces ------------------------------------------------------------------------------------------


def bf16_copy(net, src: Ref, dst: Ref) -> Call:
    return Call("bf16_copy", max(1, min(math.ceil(src.size / 1024), 4 * net.sm_count)), dict(x=src, y=dst, n=i32(src.size)))


def copy_of(net, ref: Ref) -> Ref:
    """The BF16 copy tensor of a tensor (or of the parameters: params.bf16, whose views follow)."""
    if ref.tensor == "params":
        whole = net.w.state("params.bf16", (net.w.P,), np.uint16, "the parameters in BF16 (wide BF16 products read it)")
        return Ref(whole.tensor, ref.offset, ref.shape, whole.dtype)
    return net.prog.add(ref.tensor + ".bf16", ref.shape, np.uint16, purpose="a BF16 copy a wide BF16 product reads")


def params_copy(net) -> Ref | None:
    """The parameters' BF16 copy where a product reads it (the update keeps it), else None."""
    if net.tokens:
        return copy_of(net, net.prog.ref("params")) if net.params16 else None
    mlp = mlp_shape(net)
    return copy_of(net, net.prog.ref("params")) if mlp and "P16" in mlp.copies else None


def has_copies(net, group: str) -> bool:
    mlp = mlp_shape(net)
    return mlp is not None and group in mlp.copies
