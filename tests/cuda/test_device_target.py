"""Which NVRTC target litenet/gpu/device.py asks for: sm_90a (wgmma) on compute capability 9.0 alone,
with NVRTC 12.0 or newer, unless LITENET_ARCH_SPECIFIC=0; every other GPU the newest plain target NVRTC
knows that its cubin runs on."""

import pytest

from litenet.gpu.device import arch_specific_target, cubin_target


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


SUPPORTED_12_4 = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)


@pytest.mark.parametrize("major,minor,nvrtc,supported,want", [
    (9, 0, (12, 4), SUPPORTED_12_4, "sm_90a"),
    (8, 0, (12, 4), SUPPORTED_12_4, "sm_80"),
    (8, 9, (12, 4), SUPPORTED_12_4, "sm_89"),
    (8, 9, (11, 4), (35, 50, 60, 61, 70, 75, 80, 86), "sm_86"),  # an sm_86 cubin runs on sm_89
    (6, 1, (12, 4), SUPPORTED_12_4, "sm_61"),
    (12, 0, (12, 4), SUPPORTED_12_4, None),  # newer than this NVRTC knows: CuPy's own route
    (8, 6, (11, 1), (), None),  # NVRTC 11.1 cannot list its targets
])
def test_cubin_target(monkeypatch, major, minor, nvrtc, supported, want):
    """The target of LiteNet's own cubins (gpu/kernel_cache.py) for every GPU, None where CuPy compiles."""
    monkeypatch.delenv("LITENET_ARCH_SPECIFIC", raising=False)
    assert cubin_target(major, minor, nvrtc, supported) == want


def test_plain_cubin_target_on_request(monkeypatch):
    monkeypatch.setenv("LITENET_ARCH_SPECIFIC", "0")
    assert cubin_target(9, 0, (12, 4), SUPPORTED_12_4) == "sm_90"
