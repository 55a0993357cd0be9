"""A lowered forward pass on its own, on a device: its arena allocated, the parameters (or the packed
model a rewrite reads) uploaded once, the calls bound — what `litenet-infer --backend cuda` runs for one
batch size (litenet/runtime/cuda_backend.py, programs from litenet/lowering/inference.py). The trainer's
evaluation runs its forward program inside the training step's arena instead (litenet/train/gpu_backend.py)."""

from __future__ import annotations

import numpy as np

from litenet.graph import IMAGES, ops_of
from litenet.lowering.arena import Arena, bind
from litenet.lowering.inference import PREFIX, lower_inference
from litenet.lowering.program import Program
from litenet.lowering.stats import param_offsets
from litenet.model import param_count


class ForwardRun:
    """The buffers and launches of one forward pass of `size` images; the runtime captures the launches
    in a CUDA graph once the size repeats (`runs` and `graph` are its bookkeeping)."""

    def __init__(self, program: Program, model, dev, params: np.ndarray | None = None, mode: str = "ops"):
        self.program, self.model, self.dev, self.mode = program, model, dev, mode
        self.size = int(program.tensors[PREFIX + IMAGES].shape[0])
        self.arena = Arena.plan(program)
        self.buffers = dev.allocate(self.arena)
        if "params" in program.tensors:
            if params is None:
                raise ValueError("this forward program reads the flat parameters; pass them")
            params = np.ascontiguousarray(params, np.float32)
            if params.shape != (param_count(model),):
                raise ValueError(f"expected {param_count(model)} parameters for this model, got shape {params.shape}")
            dev.upload(self.buffers["params"], params)
        if "layout" in program.tensors:
            dev.upload(self.buffers["layout"], param_offsets(model))
        for name, value in program.constants.items():  # tables and packed weights a rewrite's kernels read
            dev.upload(self.buffers[name], value)
        for call in program.refresh:  # copies of the parameters a rewrite keeps
            dev.launch(bind(call, self.buffers))
        self.launches = [bind(call, self.buffers) for call in program.calls()]
        self._logits = PREFIX + ops_of(model)[-1].name
        self.runs, self.graph = 0, None

    @classmethod
    def lowered(cls, model, params: np.ndarray, dev, size: int, kernels: str = "fast") -> "ForwardRun":
        """The fp32 forward of a model from its flat parameters, in the `kernels` tier."""
        program = lower_inference(model, size, "fp32", dev.sm_count, kernels=kernels)
        return cls(program, model, dev, params)

    @property
    def pixels(self):
        """The input images, uint8, one row of 32 · 32 · 3 values an image."""
        return self.buffers[PREFIX + IMAGES].reshape(self.size, 3072)

    @property
    def logits(self):
        return self.buffers[self._logits]

    def tensor(self, name: str):
        """A tensor of the pass by its name without the prefix ("h", "QC", an op's name)."""
        return self.buffers[PREFIX + name]

    def output(self, op_name: str):
        """The buffer holding an op's output (a rewrite may keep it under another name: Program.outputs)."""
        return self.buffers[self.program.outputs.get(op_name, PREFIX + op_name)]
