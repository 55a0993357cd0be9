"""Fixtures for the export tests: tiny model folders and a synthetic stand-in for CIFAR-10."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# NOTE: lets `.venv/bin/pytest tests/export` import litenet from a checkout that is not pip-installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import export_fixtures as fx  # noqa: E402


@pytest.fixture
def dataset(monkeypatch):
    """Replace open_cifar10 with a synthetic data set, so export runs without the real one."""
    ds = fx.fake_dataset()
    monkeypatch.setattr("litenet.data.open_cifar10", lambda **kwargs: ds)
    return ds


@pytest.fixture
def model_dir(tmp_path):
    """A trained-looking model folder (full embedding with input shift, two blocks)."""
    folder = tmp_path / "model"
    fx.write_model(folder, fx.SHAPES["full-shift"])
    return folder
