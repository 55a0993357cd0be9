"""LiteNet's compiled-kernel cache (litenet/gpu/kernel_cache.py) without a GPU: a fake compile function
stands in for NVRTC. A kernel's program holds its file's code for it alone; the key follows the headers'
content; cubins are written atomically; the parallel path compiles each missing kernel once, on several
threads at once, and skips cached ones; a compile error is the same one line on the parallel and the
serial path."""

from __future__ import annotations

import threading

import pytest

from litenet.errors import EnvironmentProblem
from litenet.gpu import kernel_cache, sources
from litenet.gpu.kernel_cache import KernelCache, KernelCompileError, NvrtcFailure, Preparation

KERNELS = ("linear_forward", "gelu_forward", "cross_entropy_forward", "sgd_momentum_update")


class FakeNvrtc:
    """Records what it compiles; `fail` names sources (by a marker in the text) that it refuses."""

    def __init__(self, fail: str | None = None, barrier: threading.Barrier | None = None):
        self.calls, self.fail, self.barrier, self._lock = [], fail, barrier, threading.Lock()

    def __call__(self, source: str, name: str, options: tuple) -> bytes:
        with self._lock:
            self.calls.append(name)
        if self.barrier is not None:  # passes only when as many compiles run at once as the barrier has parties
            self.barrier.wait(timeout=10)
        if self.fail and self.fail in source:
            raise NvrtcFailure(f"{name}(3): warning: something minor\n{name}(7): error: identifier \"x\" is "
                               "undefined\n\n1 error detected in the compilation of \"" + name + "\".\n")
        return f"cubin of {name} {options[-1]}".encode()


def cache(tmp_path, compile, read=lambda kernel: f"// source of {kernel}\n", target="sm_86") -> KernelCache:
    return KernelCache(target, (12, 4), ("-std=c++14",), compile=compile, root=tmp_path, read=read)


@pytest.mark.parametrize("file", sources.KERNEL_FILES)
def test_a_kernels_program_generates_code_for_it_alone(file):
    """Each kernel of a file gets a program in which it is the one `extern "C" __global__` function, with
    its own parameters; the file's other kernels stay (other kernels' helpers may sit among them) as
    unreferenced static device functions."""
    kernels = sources.signatures(file)
    for kernel, params in kernels.items():
        program = sources.kernel_program(kernel)
        assert sources.parse_signatures(program) == {kernel: params}
        for other in kernels.keys() - {kernel}:
            assert f"static __device__ void {other}(" in program


def test_key_follows_an_included_header(tmp_path):
    (tmp_path / "k.cu").write_text('#include "h.cuh"\nextern "C" __global__ void k() {}\n')
    header = tmp_path / "h.cuh"
    header.write_text("#pragma once\n#define SCALE 1\n")
    before = sources.inline_headers(tmp_path / "k.cu")
    key = kernel_cache.cache_key(before, ("-std=c++14",), "sm_86", (12, 4))
    header.write_text("#pragma once\n#define SCALE 2\n")
    after = sources.inline_headers(tmp_path / "k.cu")
    assert "SCALE 2" in after and kernel_cache.cache_key(after, ("-std=c++14",), "sm_86", (12, 4)) != key


@pytest.mark.parametrize("change", ["options", "target", "nvrtc"])
def test_key_follows_options_target_and_nvrtc(change):
    base = dict(source="s", options=("-std=c++14",), target="sm_86", nvrtc_version=(12, 4))
    other = dict(base, **{"options": {"options": ("-std=c++14", "-lineinfo")}, "target": {"target": "sm_90a"},
                          "nvrtc": {"nvrtc_version": (12, 6)}}[change])
    assert kernel_cache.cache_key(**base) != kernel_cache.cache_key(**other)


def test_cache_folder_per_target_and_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cupy"))
    assert KernelCache("sm_90a", (12, 4), ()).folder == tmp_path / "cupy" / "litenet-sm_90a"
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert KernelCache("sm_86", (12, 4), ()).folder == tmp_path / "mine" / "litenet-sm_86"


def test_cubin_is_written_whole_and_named_by_its_kernel_and_key(tmp_path):
    fake = FakeNvrtc()
    c = cache(tmp_path, fake)
    path = c.cubin("linear_forward")
    assert path.read_bytes() == b"cubin of linear_forward.cu -arch=sm_86"
    assert path.parent == tmp_path / "litenet-sm_86" and path.suffix == ".cubin"
    assert path.name.startswith("linear_forward-")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left behind
    assert c.cubin("linear_forward") == path and fake.calls == ["linear_forward.cu"]  # the second time: cached


def test_a_failed_write_leaves_no_partial_file_and_no_cubin(tmp_path, monkeypatch):
    c = cache(tmp_path, FakeNvrtc())

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kernel_cache.os, "replace", refuse)
    with pytest.raises(EnvironmentProblem, match=f"cannot write the kernel cache .*{kernel_cache.CACHE_ENV}"):
        c.cubin("linear_forward")
    assert list(c.folder.iterdir()) == []


def test_parallel_path_compiles_each_missing_kernel_once_and_skips_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_cache, "worker_count", lambda jobs: jobs)
    cache(tmp_path, FakeNvrtc()).cubin("gelu_forward")  # already cached before the run
    fake = FakeNvrtc(barrier=threading.Barrier(3))  # the three missing kernels must compile at the same time
    compiled, workers, seconds = cache(tmp_path, fake).compile_missing(KERNELS + ("linear_forward",))
    assert (compiled, workers) == (3, 3) and seconds >= 0
    assert sorted(fake.calls) == ["cross_entropy_forward.cu", "linear_forward.cu", "sgd_momentum_update.cu"]
    again = FakeNvrtc()
    assert cache(tmp_path, again).compile_missing(KERNELS) == (0, 0, 0.0) and again.calls == []


def test_worker_count_is_bounded_by_the_kernels_and_the_cpus():
    assert kernel_cache.worker_count(1) == 1
    assert 1 <= kernel_cache.worker_count(1000) <= 1000


def one_line_error(tmp_path, run) -> str:
    read = lambda kernel: f"// {'BROKEN' if kernel == 'cross_entropy_forward' else 'fine'} {kernel}"  # noqa: E731
    with pytest.raises(KernelCompileError) as info:
        run(KernelCache("sm_86", (12, 4), (), compile=FakeNvrtc(fail="BROKEN"), root=tmp_path, read=read))
    return str(info.value)


def test_a_compile_error_is_one_line_alike_on_both_paths(tmp_path):
    parallel = one_line_error(tmp_path / "a", lambda c: c.compile_missing(KERNELS))
    serial = one_line_error(tmp_path / "b", lambda c: c.cubin("cross_entropy_forward"))
    assert "\n" not in parallel
    assert parallel.startswith("NVRTC 12.4 could not compile cross_entropy_forward (kernels/loss.cu) for sm_86: "
                               'cross_entropy_forward.cu(7): error: identifier "x" is undefined (NVRTC\'s log: ')
    assert parallel.replace(str(tmp_path / "a"), "") == serial.replace(str(tmp_path / "b"), "")
    log = parallel.rsplit("NVRTC's log: ", 1)[1].rstrip(")")
    assert "1 error detected" in open(log).read()  # the whole log is kept
    assert not list((tmp_path / "a" / "litenet-sm_86").glob("*.partial"))


def test_preparation_lines():
    assert Preparation(20, 20, 16, 6.14).describe() == "20 compiled in 6.1 s (16 workers), 0 cached"
    assert Preparation(20, 0, 0, 0.43).describe() == "all 20 cached, loaded in 0.4 s"
    assert Preparation(20, 1, 1, 2.0).describe() == "1 compiled in 2.0 s (1 worker), 19 cached"
    assert "CuPy" in Preparation(5, None, 1, 9.0).describe()
    assert Preparation(2, 1, 1, 1.23456, 1.0, "sm_90a").record() == {
        "kernels": 2, "compiled": 1, "workers": 1, "seconds": 1.235, "compile_seconds": 1.0, "target": "sm_90a"}


def nvcc_cubin(source: str, name: str, options: tuple) -> bytes:
    """nvcc in NVRTC's place (this machine has no GPU, so no NVRTC through CuPy): the same source, the
    options nvcc shares with NVRTC, a cubin or the compiler's log."""
    import subprocess
    import tempfile
    from pathlib import Path

    shared = [o for o in options if o.startswith(("-std=", "-arch=", "-ftz="))]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / name
        src.write_text(source)
        run = subprocess.run(["nvcc", "--cubin", *shared, "-o", str(src.with_suffix(".cubin")), str(src)],
                             capture_output=True, text=True)
        if run.returncode:
            raise NvrtcFailure(run.stderr)
        return src.with_suffix(".cubin").read_bytes()


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc is not installed")
def test_real_compiler_through_the_cache(tmp_path):
    """Real kernels' programs through the parallel path with nvcc standing in for NVRTC: each an sm_90a cubin
    holding that kernel and no other of its file, and a real compiler's error as the one line."""
    c = KernelCache("sm_90a", (12, 4), ("-std=c++14", "-ftz=true"), compile=nvcc_cubin, root=tmp_path)
    assert c.compile_missing(("gelu_forward", "cross_entropy_forward"))[0] == 2
    gelu, loss = (c.path(k).read_bytes() for k in ("gelu_forward", "cross_entropy_forward"))
    assert gelu[:4] == loss[:4] == b"\x7fELF"
    assert b".text.gelu_forward" in gelu and b".text.gelu_backward" not in gelu
    assert b".text.cross_entropy_forward" in loss and b".text.margin_loss_forward" not in loss
    broken = KernelCache("sm_90a", (12, 4), ("-std=c++14",), compile=nvcc_cubin, root=tmp_path,
                         read=lambda k: sources.kernel_program(k) + "\nint broken = undefined_name;\n")
    with pytest.raises(KernelCompileError, match=r"^NVRTC 12\.4 could not compile gelu_forward \(kernels/gelu\.cu\) "
                                                 r"for sm_90a: .*error.*undefined_name[^\n]*$"):
        broken.compile_missing(("gelu_forward",))
