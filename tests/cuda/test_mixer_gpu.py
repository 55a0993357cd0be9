"""The Mixer's kernels and CUDA backend on a real GPU (`make test-gpu`; skipped without one): every
kernel against its twin at the test shapes and at litenet-mixer's real sizes (batch 256: 16,384
patch rows, N = 32,768 columns for the products across the patches), in fp32 and on the tensor cores;
whole steps against the NumPy backend; graph replay against eager launches."""

import numpy as np
import pytest
from harness import compare_kernel
from mixer_cases import MIXER_KERNEL_SHAPES
from shapes import ids

pytestmark = pytest.mark.gpu

REAL = [(f"{name}{suffix}", shape) for suffix in ("", "_tf32", "_bf16") for name, shape in [
    ("linear_gelu_forward", dict(B=16384, n_in=128, n_out=512)),
    ("linear_residual_forward", dict(B=16384, n_in=512, n_out=128)),
    ("linear_backward_input_gelu", dict(B=16384, n_in=512, n_out=128)),
    ("linear_backward_weight", dict(B=16384, n_in=512, n_out=128, splits=33)),
    ("token_linear_gelu_forward", dict(T=64, T_out=64, N=32768)),
    ("token_linear_backward_input_gelu", dict(T=64, T_out=64, N=32768)),
    ("token_linear_backward_weight", dict(T=64, T_out=64, N=32768, splits=264)),
]] + [("patches_gather", dict(B=256, patch=4, grid=528)), ("patches_gather", dict(B=256, patch=4, cut=8, grid=528)),
      ("patches_gather", dict(B=256, patch=4, cut=8, mix=1, grid=528)),
      ("layernorm_forward", dict(B=16384, d=128)),
      ("mean_tokens_forward", dict(T=64, N=32768, grid=128)), ("cross_entropy_smoothed", dict(B=256, C=10)),
      ("cross_entropy_smoothed", dict(B=256, C=10, mix=1))]


@pytest.mark.parametrize("name,shape", MIXER_KERNEL_SHAPES + REAL, ids=ids(MIXER_KERNEL_SHAPES + REAL))
def test_mixer_kernel_matches_twin_on_gpu(gpu, name, shape):
    compare_kernel(gpu, name, **shape)


def test_mixer_steps_match_the_numpy_backend_on_gpu():
    from test_mixer_backend_emulated import MODEL, NOISE_ONLY, recipe, run, schedule

    from litenet.model import init_params, param_views
    from litenet.train.cuda.mixer_backend import MixerCudaBackend
    from litenet.train.numpy_backend import NumpyBackend

    data = schedule()
    ours = MixerCudaBackend(MODEL, recipe(), init_params(MODEL, 0), steps_per_graph=2)
    numpy = NumpyBackend(MODEL, recipe(), init_params(MODEL, 0), dtype=np.float64)
    got, want = run(ours, *data), run(numpy, *data)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    np.testing.assert_allclose(got["path"], want["path"], rtol=1e-4)
    a, b = param_views(ours.state()["params"], MODEL), param_views(numpy.state()["params"], MODEL)
    for name in a:
        if not name.endswith(NOISE_ONLY):
            np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-4, err_msg=name)
    eager = MixerCudaBackend(MODEL, recipe(), init_params(MODEL, 0), graph=False)
    assert np.array_equal(run(eager, *data)["loss"], got["loss"])
