"""Settings for the whole test suite, and the one skip of every `gpu`-marked test where no GPU is usable."""

import os

import pytest

# Tests use tiny matrices: one BLAS thread is as fast, and it avoids the collapse that spinning
# OpenBLAS threads suffer when a 2-core machine is shared with other jobs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config, items):
    """Skip every `gpu` test, wherever it lives, with the reason `litenet train --backend auto` gives."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return  # CPU-only runs never import CuPy
    from litenet.train.backends import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))
