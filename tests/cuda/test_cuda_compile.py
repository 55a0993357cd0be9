"""Every kernel file compiles with this machine's nvcc for sm_75 and sm_90, as written and as the
loader hands it to NVRTC (headers inlined), so a syntax error never lands. nvcc 13 cannot target
sm_61 any more; the GTX 1060 is reached by NVRTC at run time (cupy-cuda11x/12x). Skips without nvcc."""

import shutil
import subprocess

import pytest

from litenet.gpu import sources

nvcc = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(nvcc is None, reason="nvcc is not installed")


ARCHS = ("75", "90")


@pytest.mark.parametrize("name", sources.KERNEL_FILES)
def test_kernel_file_compiles(name, tmp_path):
    targets = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
    run = subprocess.run([nvcc, "-c", *targets, "-std=c++14", "-Werror", "all-warnings", "-o", str(tmp_path / "k.o"),
                          str(sources.source_path(name))], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("name", sources.KERNEL_FILES)
def test_inlined_source_compiles_to_ptx(name, tmp_path):
    """What NVRTC receives: one self-contained source, every kernel declared extern "C"."""
    src = tmp_path / f"{name.replace('/', '-')}.cu"
    src.write_text(sources.read_source(name))
    run = subprocess.run([nvcc, "--ptx", "-arch=sm_75", "-std=c++14", "-o", str(tmp_path / "k.ptx"), str(src)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for kernel in sources.signatures(name):
        assert f".entry {kernel}(" in ptx, f"{kernel} is missing (or name-mangled) in the PTX"


@pytest.mark.parametrize("name", ["linear", "embed"])
def test_hopper_target_compiles_wide_bf16_to_wgmma(name, tmp_path):
    """The files with wide BF16 tiles as litenet/gpu/device.py builds them on an sm_90 GPU (sm_90a): the
    tile takes wgmma.cuh's warpgroup product, with no warning from ptxas (such as wgmma serialised
    because the compiler touched the accumulators while one was in flight)."""
    src = tmp_path / f"{name.replace('/', '-')}.cu"
    src.write_text(sources.read_source(name))
    target = "-gencode=arch=compute_90a,code=sm_90a"
    run = subprocess.run([nvcc, "-c", target, "-std=c++14", "-Werror", "all-warnings", "-o", str(tmp_path / "k.o"),
                          str(src)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = subprocess.run([nvcc, "--ptx", "-arch=sm_90a", "-std=c++14", "-o", str(tmp_path / "k.ptx"), str(src)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    entries = (tmp_path / "k.ptx").read_text().split(".entry ")[1:]
    wide = {e.split("(")[0]: "wgmma.mma_async" in e for e in entries if "_wide_bf16(" in e.split("\n")[0]}
    assert wide and all(wide.values()), wide
    others = [e.split("(")[0] for e in entries if "wgmma" in e and "_wide_bf16(" not in e.split("\n")[0]]
    assert not others, others
