"""A network's forward pass on its own: the lowering's forward program for one batch size, with the
parameters in its arena — what `litenet-infer --backend cuda` runs for a network that is a layer list
(litenet/runtime/cuda_backend.py). The trainer's evaluation runs the same program inside the training
step's arena (litenet/train/gpu_backend.py)."""

from __future__ import annotations

import numpy as np

from litenet.graph import ops_of
from litenet.lowering import lower_forward
from litenet.lowering.arena import Arena, bind
from litenet.lowering.stats import param_offsets
from litenet.model import param_count

PREFIX = "eval/"


class ForwardRun:
    """The buffers and launches of a forward pass of `size` images; the runtime captures the launches in a
    CUDA graph once the size repeats (the `runs` and `graph` fields are its bookkeeping, as for the
    planners' BatchRun)."""

    def __init__(self, model, params: np.ndarray, dev, size: int, kernels: str = "fast"):
        params = np.ascontiguousarray(params, np.float32)
        if params.shape != (param_count(model),):
            raise ValueError(f"expected {param_count(model)} parameters for this model, got shape {params.shape}")
        program = lower_forward(model, size, kernels, PREFIX, precision="fp32", sm_count=dev.sm_count)
        self.size, self.mode, self.program = size, f"the lowering's forward ({kernels} tier)", program
        self.arena = Arena.plan(program)
        self.buffers = dev.allocate(self.arena)
        dev.upload(self.buffers["params"], params)
        if "layout" in self.buffers:
            dev.upload(self.buffers["layout"], param_offsets(model))
        for name, value in program.constants.items():  # tables a rewrite's kernels look up
            dev.upload(self.buffers[name], value)
        for call in program.refresh:  # copies of the parameters a rewrite keeps
            dev.launch(bind(call, self.buffers))
        self.launches = [bind(call, self.buffers) for call in program.calls()]
        self._logits = PREFIX + ops_of(model)[-1].name
        self.runs, self.graph = 0, None

    @property
    def pixels(self):
        """The input images, uint8, one row of 32 · 32 · 3 values an image."""
        return self.buffers[PREFIX + "images"].reshape(self.size, 3072)

    @property
    def logits(self):
        return self.buffers[self._logits]
