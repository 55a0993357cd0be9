"""The training backends, registered by name in a plain dict, and the choice between them.

Every backend class has the same small set of methods (see NumpyBackend for the reference):
  __init__(model, train, params, **options)   params: flat float32 host array (litenet.model layout)
  load_dataset(images, labels)                the training set, uint8 NHWC + uint8 labels
  train_steps(batches, lrs, flips=None, …)    enqueue one step per row of indices (the augmentation draws
                                              as keywords: flips, and crops, cutouts, mixes where supported)
  fetch_stats() -> dict of arrays             per-step statistics since the last call (STAT_FIELDS)
  logits(images) -> float32 (N, classes)      forward only, for evaluation
  weights() -> float32 (P,)                   the parameters alone, a host copy (read after every chunk)
  state() / load_state(state)                 {"params", "velocity"} as host arrays, for checkpoints
  kernel_preparation                          what making the kernels ready cost (gpu/kernel_cache.Preparation),
                                              None where nothing is compiled
"""

from __future__ import annotations

import importlib
import sys

from litenet.distribution import install_hint
from litenet.errors import LiteNetError

# What fetch_stats returns, one row per step, all measured before the clip rule rescales anything.
STAT_FIELDS = {
    "loss": "(steps,) the batch loss",
    "grad_norm": "(steps,) ‖g‖₂ over every parameter",
    "clipped": "(steps,) whether the clip rule fired",
    "grad_sq": "(steps, tensors) ‖g‖² of each parameter tensor, in param_layout order",
    "path": "(steps, blocks, 3) ‖∂s‖², ‖∂x_main‖², ⟨∂s, ∂x_main⟩ of each residual block",
}

# name → "module:Class"; imported only when chosen, so the NumPy path never needs CuPy.
BACKENDS = {
    "numpy": "litenet.train.numpy_backend:NumpyBackend",
    "cuda": "litenet.train.gpu_backend:GpuBackend",
}


# The families whose networks the CUDA backend trains: every op list the lowering walks.
CUDA_FAMILIES = ("mlp", "mixer", "layers")


def backend_class(name: str):
    """The backend class registered under `name`."""
    if name not in BACKENDS:
        raise LiteNetError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)} or auto")
    module, cls = BACKENDS[name].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        raise LiteNetError(f"backend {name} is unavailable ({exc}); {install_hint('cuda12')} (cuda11, cuda13: the CuPy for your CUDA) or use --backend numpy") from None


def cuda_unavailable_reason() -> str | None:
    """None when CuPy imports and sees a usable GPU; otherwise why not, in a few words."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or CUDA libraries missing
        return f"CuPy is not importable ({type(exc).__name__})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        return f"no usable GPU ({exc.__class__.__name__})"
    return None if count > 0 else "no GPU found"


def choose_backend(name: str, family: str | None = None) -> str:
    """Resolve `auto` to cuda where a GPU is usable and trains the model's family, else numpy with a one-line notice."""
    if name != "auto":
        return name
    reason = (f"the CUDA backend does not train the {family} family" if family not in (None, *CUDA_FAMILIES)
              else cuda_unavailable_reason())
    if reason is None:
        return "cuda"
    print(f"litenet: using the NumPy backend ({reason})", file=sys.stderr)
    return "numpy"
