"""CIFAR-10 sources that lie: oversized archive members and files, special files, re-pickled batches,
and LITENET_DATA naming another copy than the one the memory maps were built from."""

from __future__ import annotations

import io
import os
import pickle
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from cifar_fakes import make_fake, to_planar, write_layout  # noqa: E402
from litenet.data import open_cifar10  # noqa: E402
from litenet.data.archive import ArchiveSource  # noqa: E402
from litenet.data.readers import parse_python_batch, safe_unpickle  # noqa: E402
from litenet.data.source import FolderSource  # noqa: E402
from litenet.errors import LiteNetError  # noqa: E402
from litenet.limits import MAX_BATCH_FILE_BYTES  # noqa: E402


@pytest.fixture(autouse=True)
def no_env(monkeypatch, tmp_path):
    for var in ("LITENET_DATA", "LITENET_MAPS", "LITENET_DATA_URL", "LITENET_DATA_MD5"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


class Zeros(io.RawIOBase):
    """`size` zero bytes, streamed (the archive is written without holding the member in memory)."""

    def __init__(self, size):
        self.left = size

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def test_an_oversized_archive_member_is_refused_from_its_header(tmp_path):
    path = tmp_path / "cifar-10-binary.tar.gz"
    size = MAX_BATCH_FILE_BYTES + 3073
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("cifar-10-batches-bin/data_batch_1.bin")
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros(size), 1 << 20))
    with pytest.raises(LiteNetError, match="more than any CIFAR-10 batch file"):
        ArchiveSource(path)


def test_an_oversized_batch_file_in_a_folder_is_refused_before_reading(tmp_path):
    folder = write_layout(tmp_path / "cifar-10-batches-bin", make_fake(), "binary")
    with open(folder / "data_batch_1.bin", "r+b") as f:
        f.truncate(MAX_BATCH_FILE_BYTES + 1)  # sparse: no disk, no memory
    with pytest.raises(LiteNetError, match="more than any CIFAR-10 batch file"):
        list(FolderSource(folder).read_many(["data_batch_1.bin"]))


def test_a_fifo_named_as_a_batch_file_is_refused_without_blocking(tmp_path):
    folder = write_layout(tmp_path / "cifar-10-batches-bin", make_fake(), "binary")
    os.unlink(folder / "data_batch_2.bin")
    os.mkfifo(folder / "data_batch_2.bin")
    with pytest.raises(LiteNetError, match="not a regular file"):
        list(FolderSource(folder).read_many(["data_batch_2.bin"]))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_batch_re_pickled_by_python_3_is_read(protocol):
    fake = make_fake()
    images, labels = fake.train[0]
    data = pickle.dumps({b"data": to_planar(images), b"labels": [int(x) for x in labels]}, protocol=protocol)
    got, got_labels = parse_python_batch(data, "data_batch_1", records=None)
    assert np.array_equal(got, images) and np.array_equal(got_labels, labels)


def test_codecs_encode_is_allowed_for_latin1_only():
    bomb = b"\x80\x02c_codecs\nencode\nq\x00X\x03\x00\x00\x00abcq\x01X\n\x00\x00\x00zlib_codecq\x02\x86q\x03Rq\x04."
    with pytest.raises(LiteNetError, match="refused"):
        safe_unpickle(bomb, "batch")


def test_litenet_data_naming_another_copy_is_refused_once_maps_exist(tmp_path, monkeypatch):
    first = write_layout(tmp_path / "a" / "cifar-10-batches-bin", make_fake(seed=1), "binary")
    other = write_layout(tmp_path / "b" / "cifar-10-batches-bin", make_fake(seed=2), "binary")
    maps = tmp_path / "maps"
    open_cifar10(data=first, maps=maps, download=False, progress=False, records_per_batch=None)
    monkeypatch.setenv("LITENET_DATA", str(other))
    with pytest.raises(LiteNetError, match="unset LITENET_DATA"):
        open_cifar10(maps=maps, download=False, progress=False, records_per_batch=None)
    monkeypatch.setenv("LITENET_DATA", "/etc/passwd")
    with pytest.raises(LiteNetError, match="^LITENET_DATA=/etc/passwd holds no CIFAR-10"):  # named as set
        open_cifar10(maps=maps, download=False, progress=False, records_per_batch=None)
    monkeypatch.setenv("LITENET_DATA", str(first))
    assert len(open_cifar10(maps=maps, download=False, progress=False, records_per_batch=None).test.labels)
