"""Download the official CIFAR-10 archive with a progress bar, verify its MD5, and move it into place atomically."""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from tqdm import tqdm

from litenet.atomic import atomic_path
from litenet.errors import LiteNetError

PYTHON_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
BINARY_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
# The MD5 sums published on the dataset's page; they are the only checksums the authors give.
KNOWN_MD5 = {
    PYTHON_URL: "c58f30108f718f92721af3b95e74349a",
    BINARY_URL: "c32a1d4ab5d03f1284b67883e8d87530",
}
DEFAULT_URL = PYTHON_URL
TIMEOUT_S = 30
CHUNK = 1 << 20

WHERE_TO_PUT = ("put cifar-10-batches-bin/ or cifar-10-batches-py/ (or cifar-10-binary.tar.gz / "
                "cifar-10-python.tar.gz) in ./data, or point at where they are: --data PATH, LITENET_DATA=PATH, "
                "or DATA=PATH for make (make train DATA=PATH)")


def download_settings(url: str | None = None, md5: str | None = None) -> tuple[str, str]:
    """Pick URL and MD5: the arguments, then LITENET_DATA_URL / LITENET_DATA_MD5, then the official archive."""
    url = url or os.environ.get("LITENET_DATA_URL") or DEFAULT_URL
    md5 = md5 or os.environ.get("LITENET_DATA_MD5") or KNOWN_MD5.get(url)
    if not md5:
        # Without a checksum a mirror could hand us anything; make the user say what to expect.
        raise LiteNetError(f"no checksum known for {url}: set LITENET_DATA_MD5 to the archive's md5")
    return url, md5.lower()


def download(url: str, md5: str, dest_dir: Path, progress: bool = True) -> Path:
    """Fetch `url` into `dest_dir` through a temporary file; return the archive path once its MD5 matches."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / (PurePosixPath(urlparse(url).path).name or "cifar-10.tar.gz")
    # atomic_path deletes the temporary file on any error, so ./data never holds a partial archive.
    with atomic_path(final) as tmp, open(tmp, "wb") as out:
        digest = hashlib.md5()
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
                total = int(resp.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc=f"downloading {final.name}",
                          disable=not progress, leave=False) as bar:
                    while chunk := resp.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", None) or e
            raise LiteNetError(f"cannot download CIFAR-10 from {url} ({reason}); {WHERE_TO_PUT}") from None
        if digest.hexdigest() != md5:
            raise LiteNetError(f"{url}: checksum mismatch (md5 {digest.hexdigest()}, expected {md5}); "
                               "the download was deleted, try again or " + WHERE_TO_PUT)
    return final
