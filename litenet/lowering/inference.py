"""The runtime's forward pass, lowered: what `litenet-infer --backend cuda` runs for one batch size.

  fp32, a Mixer or a layer list   the fast tier's forward (the trainer's evaluation program), its products
                                  split for two blocks per multiprocessor — at batch 1 a channel product has
                                  two tiles and a 512-long sum, and two blocks would be the whole forward's
                                  critical path
  fp32 or int8, the MLP           the inference kernels' rewrite of the whole pass (fast/rows.py): one
                                  launch for small batches, tiles for large ones, from the packed model
  fp32 or int8, the Mixer, mode   the whole forward in one launch, or a launch a phase (fast/mixer_rows.py),
  fused or phases                 meant for one image (the runtime's auto picks it at batch 1, where it wins)
  int8, the Mixer                 the int8 plan's rewrite (fast/int8_tokens.py), a launch per op
A layer list's int8 runs in ONNX Runtime: no rewrite covers it, and the reference tier computes in float.

The pixels and the logits get bytes of their own (the runtime uploads the one and reads the other around
every replay); the other step tensors share the arena by liveness as in training.
"""

from __future__ import annotations

import dataclasses

from litenet.graph import IMAGES, ops_of
from litenet.lowering import lower_forward
from litenet.lowering.program import Program
from litenet.lowering.walk import forward_program

INFERENCE_BLOCKS_PER_SM = 2
MIXER_ROWS_MODES = ("fused", "phases")
PREFIX = "eval/"


def lower_inference(model, batch: int, precision: str, sm_count: int, packed=None, mode: str = "ops",
                    grid: int | None = None, kernels: str = "fast") -> Program:
    """The forward pass of `batch` images. `packed`: the runtime's packed weights (the MLP's PackedNet,
    the Mixer's int8 MixerWeights) where a rewrite reads them; `mode`: the MLP's fused | phases | tiles, the
    Mixer's fused | phases | ops, "ops" otherwise; `grid`: the rows kernels' block count (default one per SM)."""
    family = model.family
    if family == "mlp" and packed is not None:
        from litenet.lowering.fast.rows import mlp_inference
        program = mlp_inference(forward_program(model, batch, PREFIX), packed, batch, PREFIX, mode, grid or sm_count)
    elif family == "mixer" and mode in MIXER_ROWS_MODES:
        from litenet.lowering.fast.mixer_rows import mixer_rows_inference
        program = mixer_rows_inference(forward_program(model, batch, PREFIX), model, batch, PREFIX, mode,
                                       grid or sm_count, packed if precision == "int8" else None)
    elif precision == "int8" and family == "mixer":
        from litenet.lowering.fast.int8_tokens import mixer_int8_inference
        program = mixer_int8_inference(forward_program(model, batch, PREFIX), packed, batch, PREFIX, sm_count)
    elif precision == "fp32":
        program = lower_forward(model, batch, kernels, PREFIX, precision="fp32", sm_count=sm_count,
                                blocks_per_sm=INFERENCE_BLOCKS_PER_SM)
    else:
        raise ValueError(f"no lowering runs a {family} network in {precision}")
    return _own_bytes(_pruned(program), (PREFIX + IMAGES, PREFIX + ops_of(model)[-1].name))


def _pruned(program: Program) -> Program:
    """Without the state tensors no call names (the flat parameters, where a rewrite reads packed ones)."""
    named = {t for call in program.calls() for t in call.tensors()} | {t for call in program.refresh for t in call.tensors()}
    keep = {k: t for k, t in program.tensors.items() if t.life != "state" or k in named or k in program.constants}
    return dataclasses.replace(program, tensors=keep)


def _own_bytes(program: Program, names) -> Program:
    for name in names:
        program.tensors[name] = dataclasses.replace(program.tensors[name], life="state")
    return program
