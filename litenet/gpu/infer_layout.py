"""How the inference kernels lay out a packed model (kernels/infer_core.cuh, token_linear_int8.cu): the
padding of a weight row and the phases of the MLP's forward — shared by the runtime, which packs the
model (litenet/runtime/cuda_net.py, cuda_mixer_net.py), and the lowering's inference rewrites, which
launch the kernels over it (litenet/lowering/fast/rows.py, int8_tokens.py)."""

from __future__ import annotations

from litenet import graph


def pad64(k: int) -> int:
    """A row's padded length for the tiled and rows kernels: whole 64-element slabs."""
    return (k + 63) // 64 * 64


def pad16(k: int) -> int:
    """A token product's padded k: whole int4 words of four int8 (token_linear_int8.cu)."""
    return (k + 15) // 16 * 16


def padded_k(op: graph.Op) -> int:
    """Bytes of one packed int8 weight row of a product (its K, zero-padded)."""
    k = op.params[0].shape[0]
    return pad16(k) if op.kind == "token_linear" else pad64(k)


def layers(model) -> list[tuple[str, int, int]]:
    """(name, N out, K in) of every product, one per phase of the MLP's forward, in op-list order."""
    return [(op.name, op.params[0].shape[1], op.params[0].shape[0]) for op in graph.products(model)]


def phases(model) -> int:
    """Phases of the MLP kernels' forward: one per product (embed, fc1 and fc2 of each block, head)."""
    return len(graph.products(model))
