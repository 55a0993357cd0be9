"""What a benchmark says about the machine it ran on: CPU, cores, GPU, library versions, emulation.

Cheap and side-effect free: nothing here imports CuPy or TensorRT; their versions are read only
when a backend has already imported them, and the GPU is named by nvidia-smi when it is on PATH.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

# Distributions whose versions a benchmark reports, when installed (by distribution name; CuPy's
# wheels are named per CUDA version, so every known name is tried).
LIBRARIES = ("numpy", "onnxruntime", "onnxruntime-gpu", "opencv-python-headless", "opencv-python",
             "cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x", "cupy", "tensorrt", "pillow")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo ("model name" on x86, "Model"/"Hardware" on ARM), else platform's guess."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    for key in ("model name", "Model", "Hardware", "cpu model"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or platform.machine() or "unknown CPU"


def emulation() -> str | None:
    """A few words when this process runs under an emulator (qemu user mode), else None.

    qemu-user takes its CPU model from QEMU_CPU and passes the environment on to the emulated
    program; scripts/arm-check.sh sets it for each Raspberry Pi profile. A real board never has it.
    """
    cpu = os.environ.get("QEMU_CPU")
    if cpu:
        return f"qemu user-mode emulation of {platform.machine()} (QEMU_CPU={cpu})"
    return None


def gpus() -> list[str]:
    """The GPUs nvidia-smi lists ("NVIDIA H200, driver 580.xx, 143771 MiB"), or [] without one."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            rows.append(f"{parts[0]}, driver {parts[1]}, {parts[2]}")
    return rows


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a benchmark depends on, plus Python's."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if "tensorrt" in sys.modules and "tensorrt" not in versions:  # installed outside pip (NVIDIA's packages)
        versions["tensorrt"] = getattr(sys.modules["tensorrt"], "__version__", "?")
    return versions


def describe() -> dict:
    """The machine as one JSON-ready dict (schema in docs/runtime.md, "litenet bench-infer")."""
    from litenet.runtime.onnxruntime_backend import physical_cores

    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:
        allowed = os.cpu_count() or 1
    return {"cpu": cpu_name(), "arch": platform.machine(), "logical_cpus": allowed,
            "physical_cores": physical_cores(), "os": f"{platform.system()} {platform.release()}",
            "gpus": gpus(), "libraries": library_versions(), "emulated": emulation()}


def summary_lines(machine: dict) -> list[str]:
    """The machine in two or three lines of text, for the head of a table."""
    libs = ", ".join(f"{k} {v}" for k, v in machine["libraries"].items())
    lines = [f"CPU: {machine['cpu']} ({machine['arch']}), {machine['physical_cores']} cores, "
             f"{machine['logical_cpus']} logical CPUs; {machine['os']}",
             "GPU: " + ("; ".join(machine["gpus"]) or "none found"),
             f"Libraries: {libs}"]
    if machine.get("emulated"):
        lines.insert(0, f"EMULATED: {machine['emulated']}; the times below are the emulator's, not the board's")
    return lines
