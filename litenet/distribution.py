"""The name LiteNet is installed under, and the one-line install hints built from it.

The import package and the commands are `litenet`, but the PyPI name `litenet` belongs to an
unrelated project (a socket messaging client with its own `litenet` command), so the distribution
is `litenet-nn`. Every hint that tells a user what to install is built here, so none can name the
other project; tests/test_install_hints.py holds the tree to it.
"""

DISTRIBUTION = "litenet-nn"


def install_hint(extra: str | None = None) -> str:
    """The pip command that installs LiteNet, or LiteNet with `extra` (e.g. "train", "cuda12")."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


def cupy_hint() -> str:
    """How to install CuPy for the GPU backends: the extra matching the machine's CUDA."""
    return f"{install_hint('cuda12')} (or cuda11, cuda13: the one matching your CUDA)"
