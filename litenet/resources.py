"""Where LiteNet's bundled files live, in a source checkout and in an installed wheel."""

from __future__ import annotations

from pathlib import Path

# In a checkout `kernels/` and `models/` sit beside the package; a wheel maps them into
# `litenet/kernels` and `litenet/models` (see pyproject.toml's package-dir).
_PACKAGE = Path(__file__).resolve().parent


def _bundled(folder: str) -> Path:
    for candidate in (_PACKAGE / folder, _PACKAGE.parent / folder):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"LiteNet's {folder}/ folder is missing from {_PACKAGE.parent}; reinstall litenet")


def kernels_dir() -> Path:
    """The folder of CUDA sources (`kernels/*.cu`)."""
    return _bundled("kernels")


def models_dir() -> Path:
    """The folder of presets (`models/*.toml`) and shipped trained models."""
    return _bundled("models")
