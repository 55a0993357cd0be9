"""Helpers of the whole-backend tests (emulator and GPU alike): learnable synthetic data, a step
schedule, a CudaBackend and a NumpyBackend from the same start, and a one-step comparison."""

from __future__ import annotations

import numpy as np

from litenet.model import init_params, param_views
from litenet.train.cuda.backend import CudaBackend
from litenet.train.cuda.check import FLOAT32, compare
from litenet.train.numpy_backend import NumpyBackend
from tests.golden.record import learnable_images


def data(n=40, classes=10, seed=0):
    """Images with something to learn (tests/golden/record.learnable_images), labels as int64.
    (On pure noise at a high learning rate the seed recipe's loss explodes and from step ~107 any two
    float32 summation orders, NumPy float32 against float64 too, part ways: that tests
    conditioning, not the kernels.)"""
    images, labels = learnable_images(n, classes, seed)
    return images, labels.astype(np.int64)


def schedule(steps, n, batch, seed=1, flips=True):
    rng = np.random.default_rng(seed)
    batches = np.stack([rng.permutation(n)[:batch] for _ in range(steps)])
    return batches, np.linspace(0.05, 0.2, steps), (rng.random((steps, batch)) < 0.5) if flips else None


def backend_pair(model, train, plan, device, dtype=np.float32, n=40, **options):
    """A CudaBackend on `device` and a NumpyBackend from the same initialisation and data."""
    images, labels = data(n=n, classes=model.classes)
    params = init_params(model, train.seed)
    cuda = CudaBackend(model, train, params, plan=plan, device=device, **options)
    ref = NumpyBackend(model, train, params, dtype=dtype)
    for b in (cuda, ref):
        b.load_dataset(images, labels)
    return cuda, ref


def compare_one_step(cuda, ref, model, batch, n=40, tol=FLOAT32):
    """One step on both backends; the gradient (the velocity after a first step, g + wd·w) and the
    statistics must agree within `tol` (float32's, or a tensor-core precision's: check.TOLERANCES)
    for the chain of sums behind them."""
    args = schedule(1, n, batch)
    cuda.train_steps(*args)
    ref.train_steps(*args)
    got, want = cuda.state(), ref.state()
    chain = 3 * model.embed_inputs + 4 * model.blocks * (model.width + model.hidden) + 3 * batch
    worst = {}
    for name, g in param_views(got["velocity"], model).items():
        worst[name] = compare("step", f"gradient of {name}", g, param_views(want["velocity"], model)[name], chain, tol)
    a, b = cuda.fetch_stats(), ref.fetch_stats()
    for key in ("loss", "grad_norm", "grad_sq", "path"):
        worst[key] = compare("step", key, a[key], b[key], chain, tol)
    assert (a["clipped"] == b["clipped"]).all()
    return worst
