"""The kernel cache with NVRTC on a GPU (skipped without CuPy and a GPU): an empty cache compiles each
kernel once, a second device loads them all from it, and the plain target's cubins (LITENET_ARCH_SPECIFIC=0,
compiled through the same cache) compute what the twins do. Whether NVRTC's compiles overlap on the threads
is measured (bench/results/gpu-startup.md), not asserted: NVRTC 13.0 ran them one at a time."""

from __future__ import annotations

import pytest
from harness import Runner, compare_kernel

from litenet.gpu.kernel_cache import CACHE_ENV, worker_count

pytestmark = pytest.mark.gpu

# The products of a litenet-mixer BF16 step: the heaviest kernels a preset compiles.
KERNELS = ("linear_forward_bf16", "linear_gelu_forward_bf16", "linear_backward_input_bf16", "linear_backward_weight_bf16",
           "token_linear_gelu_forward_bf16", "token_linear_residual_forward_bf16", "token_linear_backward_input_bf16",
           "token_linear_backward_weight_bf16")


def test_empty_cache_compiles_each_kernel_once_then_loads(tmp_path, monkeypatch):
    from litenet.gpu.device import CupyDevice

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    cold = CupyDevice().prepare(KERNELS)
    assert (cold.kernels, cold.compiled, cold.workers) == (len(KERNELS), len(KERNELS), worker_count(len(KERNELS)))
    assert 0 < cold.compile_seconds and 0 < cold.seconds, cold.record()
    assert len(list((tmp_path / f"litenet-{cold.target}").glob("*.cubin"))) == len(KERNELS)
    warm = CupyDevice().prepare(KERNELS)
    assert warm.compiled == 0 and warm.seconds < cold.seconds


@pytest.mark.parametrize("name,shape", [("linear_forward", dict(B=70, n_in=36, n_out=68, splits=2)),
                                        ("embed_forward_bf16", dict(B=5, d=20)),
                                        ("linear_forward_wide_bf16", dict(B=130, n_in=40, n_out=136, splits=2)),
                                        ("gelu_backward", dict(n=1000))])  # test shapes of shapes.py
def test_plain_target_cubins_match_the_twins(tmp_path, monkeypatch, name, shape):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("LITENET_ARCH_SPECIFIC", "0")
    runner = Runner("cupy")
    compare_kernel(runner, name, **shape)
    assert list(tmp_path.glob("litenet-sm_*/*.cubin"))  # compiled by LiteNet, not by CuPy
