"""Which NVRTC target litenet/gpu/device.py asks for: sm_90a (wgmma) on compute capability 9.0 alone,
with NVRTC 12.0 or newer, unless LITENET_ARCH_SPECIFIC=0; every other GPU keeps CuPy's plain target."""

import pytest

from litenet.gpu.device import arch_specific_target


@pytest.mark.parametrize("major,minor,nvrtc,want", [
    (9, 0, (13, 0), "sm_90a"),
    (9, 0, (12, 0), "sm_90a"),
    (9, 0, (11, 8), None),  # sm_90a arrived with CUDA 12.0
    (8, 0, (13, 0), None),
    (8, 9, (12, 4), None),
    (6, 1, (12, 4), None),  # GTX 1060
    (10, 0, (13, 0), None),  # sm_90a code does not run on later GPUs
])
def test_target_by_capability(monkeypatch, major, minor, nvrtc, want):
    monkeypatch.delenv("LITENET_ARCH_SPECIFIC", raising=False)
    assert arch_specific_target(major, minor, nvrtc) == want


def test_plain_target_on_request(monkeypatch):
    monkeypatch.setenv("LITENET_ARCH_SPECIFIC", "0")
    assert arch_specific_target(9, 0, (13, 0)) is None
