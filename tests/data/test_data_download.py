"""Downloading against a loopback HTTP server: checksum OK, checksum wrong, and no server at all."""

import functools
import hashlib
import socket
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from cifar_fakes import make_archive
from litenet.data.download import KNOWN_MD5, download_settings
from litenet.errors import LiteNetError


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture
def server(tmp_path, py_dir):
    """Serve tmp_path/www (holding a synthetic cifar-10-python.tar.gz) on 127.0.0.1; yield (url, md5)."""
    www = tmp_path / "www"
    www.mkdir()
    archive = make_archive(www / "cifar-10-python.tar.gz", py_dir)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/{archive.name}", hashlib.md5(archive.read_bytes()).hexdigest()
    httpd.shutdown()
    httpd.server_close()


def test_download_then_convert(server, isolated, fake, monkeypatch, open_small):
    url, md5 = server
    monkeypatch.setenv("LITENET_DATA_URL", url)
    monkeypatch.setenv("LITENET_DATA_MD5", md5)
    ds = open_small(download=True)
    np.testing.assert_array_equal(ds.test.images, fake.test[0])
    assert sorted(p.name for p in (isolated / "data").iterdir()) == ["cifar-10-python.tar.gz", "cifar10-maps"]
    assert ds.manifest["source"]["path"] == str(isolated / "data" / "cifar-10-python.tar.gz")


def test_wrong_checksum_deletes_the_download(server, isolated, open_small):
    url, _ = server
    with pytest.raises(LiteNetError, match="checksum mismatch .* the download was deleted"):
        open_small(download=True, url=url, md5="0" * 32)
    assert list((isolated / "data").iterdir()) == []


def test_unreachable_server_gives_one_line_saying_where_to_put_the_files(open_small):
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LiteNetError) as err:
        open_small(download=True, url=f"http://127.0.0.1:{port}/cifar-10-python.tar.gz", md5="0" * 32)
    message = str(err.value)
    assert message.startswith("CIFAR-10 not found (LITENET_DATA is not set; looked in ./data = ")
    assert "cannot download CIFAR-10 from http://127.0.0.1" in message
    assert "\n" not in message
    for hint in ("./data", "../shared/data = ", "cifar-10-batches-bin", "cifar-10-batches-py", "LITENET_DATA",
                 "DATA=PATH for make"):
        assert hint in message


def test_missing_file_on_server_is_the_same_clear_error(server, open_small):
    url, md5 = server
    with pytest.raises(LiteNetError, match=r"cannot download .*\(File not found\)"):
        open_small(download=True, url=url.replace("python", "nothing"), md5=md5)


def test_url_override_needs_a_checksum(monkeypatch):
    monkeypatch.setenv("LITENET_DATA_URL", "http://127.0.0.1:1/x.tar.gz")
    with pytest.raises(LiteNetError, match="set LITENET_DATA_MD5"):
        download_settings()
    monkeypatch.delenv("LITENET_DATA_URL")
    assert download_settings() == ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                                   "c58f30108f718f92721af3b95e74349a")
    assert KNOWN_MD5["https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"] == "c32a1d4ab5d03f1284b67883e8d87530"
