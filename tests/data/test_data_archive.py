"""Reading the official .tar.gz archives in place: layout detection, member order, damage and unsafe members."""

import io
import tarfile

import numpy as np
import pytest

from cifar_fakes import make_archive
from litenet.data.archive import ArchiveSource
from litenet.errors import LiteNetError


@pytest.mark.parametrize("layout_dir, layout", [("bin_dir", "binary"), ("py_dir", "python")])
def test_archive_gives_the_same_arrays_as_the_folder(request, tmp_path, fake, open_small, layout_dir, layout):
    folder = request.getfixturevalue(layout_dir)
    # Test batch and batch 3 first: the train map must still come out in batch order 1..5.
    order = ["test_batch.bin" if layout == "binary" else "test_batch"]
    order += sorted((p.name for p in folder.iterdir() if p.name not in order), key=lambda n: "3" not in n)
    archive = make_archive(tmp_path / f"cifar-10-{layout}.tar.gz", folder, order)
    ds = open_small(data=archive, maps=tmp_path / "maps")
    assert ds.manifest["source"] | {"sha256": None} == {"path": str(archive), "kind": "archive",
                                                       "layout": layout, "sha256": None}
    np.testing.assert_array_equal(ds.train.images, fake.train_images())
    np.testing.assert_array_equal(ds.train.labels, fake.train_labels())
    np.testing.assert_array_equal(ds.test.images, fake.test[0])


def test_both_layouts_convert_to_identical_maps(bin_dir, py_dir, tmp_path, open_small):
    a = open_small(data=bin_dir, maps=tmp_path / "maps-bin")
    b = open_small(data=py_dir, maps=tmp_path / "maps-py")
    for split in ("train", "test"):
        for kind in ("images", "labels"):
            assert a.manifest["splits"][split][kind]["sha256"] == b.manifest["splits"][split][kind]["sha256"]
    np.testing.assert_array_equal(a.train.images, b.train.images)


@pytest.mark.parametrize("cut", [0.5, 0.97])
def test_truncated_archive_is_rejected(bin_dir, tmp_path, open_small, cut):
    archive = make_archive(tmp_path / "cifar-10-binary.tar.gz", bin_dir)
    data = archive.read_bytes()
    archive.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(LiteNetError, match="cifar-10-binary.tar.gz: truncated or corrupt archive"):
        open_small(data=archive, maps=tmp_path / "maps")
    assert not (tmp_path / "maps").exists()


def test_garbage_file_is_rejected(tmp_path):
    junk = tmp_path / "cifar-10-python.tar.gz"
    junk.write_bytes(b"<html>404 not found</html>")
    with pytest.raises(LiteNetError, match="truncated or corrupt archive"):
        ArchiveSource(junk)


def archive_with(tmp_path, bad: tarfile.TarInfo, payload: bytes = b"") -> "Path":
    """A binary archive with one valid batch and one extra member `bad`."""
    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        good = tarfile.TarInfo("cifar-10-batches-bin/test_batch.bin")
        good.size = 3073
        tar.addfile(good, io.BytesIO(bytes(3073)))
        bad.size = len(payload) if bad.isfile() else 0
        tar.addfile(bad, io.BytesIO(payload) if bad.isfile() else None)
    return path


def member(name, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


@pytest.mark.parametrize("bad, message", [
    (member("../evil.sh"), "points outside the archive folder"),
    (member("cifar-10-batches-bin/../../evil.sh"), "points outside the archive folder"),
    (member("/etc/cron.d/evil"), "points outside the archive folder"),
    (member("cifar-10-batches-bin/data_batch_1.bin", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
    (member("cifar-10-batches-bin/data_batch_2.bin", tarfile.LNKTYPE, "cifar-10-batches-bin/test_batch.bin"),
     "is a link"),
    (member("cifar-10-batches-bin/dev", tarfile.CHRTYPE), "is a device or special file"),
    (member("cifar-10-batches-bin/fifo", tarfile.FIFOTYPE), "is a device or special file"),
])
def test_unsafe_members_are_refused(tmp_path, bad, message):
    path = archive_with(tmp_path, bad, b"#!/bin/sh\n" if bad.isfile() else b"")
    with pytest.raises(LiteNetError, match=f"hostile.tar.gz: member .* {message}"):
        ArchiveSource(path)


def test_archive_without_cifar_files_is_rejected(tmp_path):
    path = archive_with(tmp_path, member("readme.html"), b"hi")
    with tarfile.open(path, "w:gz") as tar:  # rewrite without the batch
        info = member("notes.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(LiteNetError, match="holds no CIFAR-10 batch files"):
        ArchiveSource(path)
