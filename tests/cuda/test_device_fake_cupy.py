"""CupyDevice's compiling and loading (litenet/gpu/device.py) without a GPU: stand-ins for CuPy and its
NVRTC binding record what the device asks of them. Prepared kernels are compiled into LiteNet's cache and
loaded from it; a second device compiles nothing; an unprepared kernel is compiled on first use; a GPU
whose target NVRTC does not list goes through CuPy's own build, a file at a time."""

from __future__ import annotations

import sys
import types

import pytest

from litenet.gpu.kernel_cache import CACHE_ENV

KERNELS = ["linear_forward", "linear_gelu_forward", "gelu_forward", "cross_entropy_forward"]


class FakeNvrtc(types.ModuleType):
    class NVRTCError(RuntimeError):
        pass

    def __init__(self):
        super().__init__("cupy_backends.cuda.libs.nvrtc")
        self.compiled, self._programs = [], {}

    def getVersion(self):
        return (12, 4)

    def getSupportedArchs(self):
        return (75, 80, 86, 89, 90)

    def createProgram(self, source, name, headers, include_names):
        self._programs[id(source)] = (source, name)
        return id(source)

    def compileProgram(self, program, options):
        self.compiled.append(self._programs[program][1])

    def getCUBIN(self, program):
        return b"cubin " + self._programs[program][1].encode()

    def getProgramLog(self, program):
        return ""

    def destroyProgram(self, program):
        self._programs.pop(program)


class FakeModule:
    def __init__(self, path=None, code=None, options=()):
        self.path, self.code = path, code

    def get_function(self, name):
        return (self, name)


def fake_cupy(major: int, minor: int):
    cupy = types.ModuleType("cupy")
    cupy.modules = []

    def raw_module(**kw):
        cupy.modules.append(FakeModule(**kw))
        return cupy.modules[-1]

    cupy.RawModule = raw_module
    props = {"name": b"Fake GPU", "multiProcessorCount": 8, "major": major, "minor": minor}
    cupy.cuda = types.SimpleNamespace(Stream=lambda non_blocking: None, Device=lambda: types.SimpleNamespace(id=0),
                                      runtime=types.SimpleNamespace(getDeviceProperties=lambda i: props))
    return cupy


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    """Install the stand-ins for a GPU of compute capability (major, minor); returns (cupy, nvrtc)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv("LITENET_ARCH_SPECIFIC", raising=False)

    def install(major: int, minor: int):
        cupy, nvrtc = fake_cupy(major, minor), FakeNvrtc()
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setitem(sys.modules, "cupy_backends", types.ModuleType("cupy_backends"))
        monkeypatch.setitem(sys.modules, "cupy_backends.cuda", types.ModuleType("cupy_backends.cuda"))
        libs = types.ModuleType("cupy_backends.cuda.libs")
        libs.nvrtc = nvrtc
        monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", libs)
        monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", nvrtc)
        return cupy, nvrtc
    return install


def test_prepared_kernels_are_compiled_once_then_loaded_from_the_cache(gpu, tmp_path):
    from litenet.gpu.device import CupyDevice

    cupy, nvrtc = gpu(8, 9)
    device = CupyDevice()
    assert device.target == "sm_89"
    cold = device.prepare(KERNELS + KERNELS[:1])
    assert (cold.kernels, cold.compiled, cold.target) == (4, 4, "sm_89")
    assert sorted(nvrtc.compiled) == sorted(f"{k}.cu" for k in KERNELS)
    assert all(m.path.startswith(str(tmp_path / "litenet-sm_89")) and m.code is None for m in cupy.modules)
    assert device.kernel("gelu_forward") == (cupy.modules[2], "gelu_forward")  # loaded by prepare, in order
    loads = len(cupy.modules)
    device.kernel("gelu_backward")  # not prepared: compiled and loaded on first use, through the cache
    assert nvrtc.compiled[-1] == "gelu_backward.cu" and len(cupy.modules) == loads + 1

    cupy, nvrtc = gpu(8, 9)  # a second process on the same cache
    warm = CupyDevice().prepare(KERNELS)
    assert warm.compiled == 0 and nvrtc.compiled == [] and len(cupy.modules) == 4


def test_a_gpu_nvrtc_does_not_list_goes_through_cupys_build(gpu):
    from litenet.gpu.device import CupyDevice

    cupy, nvrtc = gpu(12, 0)
    device = CupyDevice()
    assert device.target is None and device.cache is None
    prep = device.prepare(KERNELS)
    assert prep.compiled is None and "CuPy's compiler" in prep.describe()
    assert nvrtc.compiled == [] and [m.code is not None for m in cupy.modules] == [True, True, True]  # a module a file
