"""The search order: --data, then LITENET_DATA, then ./data, then ../shared/data."""

from pathlib import Path

import pytest

from cifar_fakes import make_archive, write_layout
from litenet.data import locate_source
from litenet.errors import LiteNetError

LEVELS = ("flag", "env", "cwd", "shared")


def mark(folder):
    """Make `folder` look like a binary layout folder (locating only looks at names)."""
    folder.mkdir(parents=True)
    (folder / "test_batch.bin").write_bytes(b"")
    return folder


@pytest.mark.parametrize("winner", LEVELS)
def test_search_order(tmp_path, isolated, monkeypatch, winner):
    places = {"flag": tmp_path / "flag", "env": tmp_path / "env", "cwd": isolated / "data",
              "shared": tmp_path / "shared" / "data"}  # ../shared/data seen from tmp_path/work
    for level in LEVELS[LEVELS.index(winner):]:  # the winner and every level below it hold data
        mark(places[level] / "cifar-10-batches-bin")
    if winner in ("flag", "env"):
        monkeypatch.setenv("LITENET_DATA", str(places["env"]))
    flag = str(places["flag"]) if winner == "flag" else None
    assert locate_source(flag, download=False) == (places[winner] / "cifar-10-batches-bin").resolve()


def test_layout_folder_archive_and_folder_with_archive_are_found(tmp_path, fake, monkeypatch):
    py = write_layout(tmp_path / "a" / "cifar-10-batches-py", fake, "python", batches=[1], meta=False)
    assert locate_source(str(tmp_path / "a"), download=False) == py  # the subfolder
    assert locate_source(str(py), download=False) == py  # the layout folder itself
    archive = make_archive(tmp_path / "b" / "cifar-10-python.tar.gz", py)
    monkeypatch.setenv("LITENET_DATA", str(archive))
    assert locate_source(None, download=False) == archive  # the archive itself
    monkeypatch.setenv("LITENET_DATA", str(archive.parent))
    assert locate_source(None, download=False) == archive  # a folder holding the archive


def test_binary_subfolder_wins_over_python(tmp_path):
    mark(tmp_path / "d" / "cifar-10-batches-py")
    binary = mark(tmp_path / "d" / "cifar-10-batches-bin")
    assert locate_source(str(tmp_path / "d"), download=False) == binary


@pytest.mark.parametrize("via", ["flag", "env"])
def test_a_named_place_without_data_is_an_error(tmp_path, isolated, monkeypatch, via):
    mark(isolated / "data" / "cifar-10-batches-bin")  # would be found if we fell through
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("LITENET_DATA", str(empty))
    origin = "--data" if via == "flag" else "LITENET_DATA"
    with pytest.raises(LiteNetError, match=f"{origin}=.*empty holds no CIFAR-10"):
        locate_source(str(empty) if via == "flag" else None, download=False)


def test_nothing_found_says_where_to_put_it():
    with pytest.raises(LiteNetError) as err:
        locate_source(None, download=False)
    message = str(err.value)
    assert "\n" not in message
    for hint in ("./data", "cifar-10-batches-bin", "cifar-10-batches-py", "LITENET_DATA", "--data", "DATA=PATH for make",
                 f"../shared/data = {(Path('..') / 'shared' / 'data').resolve()}"):
        assert hint in message


def test_a_failed_download_says_where_it_looked(monkeypatch):
    def offline(*args, **kwargs):
        raise LiteNetError("cannot download CIFAR-10 from https://example.invalid (no network); put it in ./data")
    monkeypatch.setattr("litenet.data.locate.fetch", offline)
    with pytest.raises(LiteNetError) as err:
        locate_source(None, download=True)
    message = str(err.value)
    assert message.startswith("CIFAR-10 not found (LITENET_DATA is not set; looked in ./data = ")
    assert "../shared/data = " in message and "cannot download" in message
