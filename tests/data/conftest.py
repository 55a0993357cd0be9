"""Fixtures for the data tests: an isolated working folder and tiny synthetic CIFAR-10 sources."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

# NOTE: lets `.venv/bin/pytest tests/data` import litenet from a checkout that is not pip-installed
# (`python -m pytest` and `pip install -e .` do not need it).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cifar_fakes import RECORDS, FakeCifar, make_fake, write_layout  # noqa: E402
from litenet.data import open_cifar10  # noqa: E402

ENV_VARS = ("LITENET_DATA", "LITENET_MAPS", "LITENET_DATA_URL", "LITENET_DATA_MD5")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch) -> Path:
    """Run each test in tmp_path/work with no LiteNet env vars, so ./data and ../shared/data are ours."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")  # the loopback test server must never go through a proxy
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def fake() -> FakeCifar:
    return make_fake()


@pytest.fixture
def bin_dir(tmp_path, fake) -> Path:
    return write_layout(tmp_path / "src" / "cifar-10-batches-bin", fake, "binary")


@pytest.fixture
def py_dir(tmp_path, fake) -> Path:
    return write_layout(tmp_path / "src" / "cifar-10-batches-py", fake, "python")


@pytest.fixture
def open_small():
    """open_cifar10 for the synthetic batches: no bars, no download, RECORDS records per batch."""
    return functools.partial(open_cifar10, download=False, progress=False, records_per_batch=RECORDS)
