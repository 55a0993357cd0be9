"""One helper for the lowering's whole-step tests: a GpuBackend (emulator or GPU) and a NumpyBackend from
the same start, fed the same batches, learning rates and augmentation draws as the trainer makes them."""

from __future__ import annotations

import dataclasses

import numpy as np

from litenet.model import init_params
from litenet.train import schedule
from litenet.train.gpu_backend import GpuBackend
from litenet.train.numpy_backend import NumpyBackend
from tests.golden.record import learnable_images


def data(n: int, classes: int, seed: int = 0):
    images, labels = learnable_images(n, classes, seed)
    return images, labels.astype(np.int64)


def steps(train, n_images: int, count: int, epoch: int = 0):
    """(batches, learning rates, draws) of `count` steps as the trainer's schedule makes them."""
    batches = schedule.epoch_batches(n_images, train, epoch)[:count]
    lrs = schedule.learning_rates(epoch * len(batches), len(batches), 10 * len(batches), train).astype(np.float32)
    return batches, lrs, schedule.epoch_augments(batches, train, epoch)


def run_pair(model, train, device, count: int = 3, n: int = 48, numpy_dtype=np.float64, **gpu_options):
    """`count` steps on a GpuBackend (on `device`) and a NumpyBackend (in `numpy_dtype`; a tensor-core precision
    and recompute are the GPU's alone); returns (gpu stats, numpy stats, gpu, numpy)."""
    images, labels = data(n, model.classes)
    params = init_params(model, train.seed)
    gpu = GpuBackend(model, train, params, device=device, **gpu_options)
    ref = NumpyBackend(model, dataclasses.replace(train, precision="fp32", activations="keep"), params, dtype=numpy_dtype)
    for b in (gpu, ref):
        b.load_dataset(images, labels)
    batches, lrs, draws = steps(train, n, count)
    for b in (gpu, ref):
        b.train_steps(batches, lrs, **draws)
    return gpu.fetch_stats(), ref.fetch_stats(), gpu, ref


def assert_losses_match(a, b, rtol: float = 1e-5):
    """Per-step losses, gradient norms and path sums within float32's rounding over a few steps."""
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=rtol, atol=rtol)
    np.testing.assert_allclose(a["grad_norm"], b["grad_norm"], rtol=10 * rtol)
    np.testing.assert_allclose(a["path"], b["path"], rtol=10 * rtol, atol=rtol * np.abs(b["path"]).max())
    assert (a["clipped"] == b["clipped"]).all()
