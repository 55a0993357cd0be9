"""Chromium from Debian's packages, driven by Playwright's Python package, for the Studio's browser tests.

Playwright's own browser download is not reachable here, so the system's Chromium is launched by path.
A test skips only where Chromium truly cannot run (not installed, or it will not start), saying so; with
LITENET_REQUIRE_BROWSER=1 (what .ci/run sets) that is a failure instead, so CI always runs them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cli_runs import REPO

ARTIFACTS = REPO / "test-artifacts" / "studio"  # screenshots of each view (git-ignored)
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def chromium_path() -> str | None:
    """LITENET_CHROMIUM, else Debian's chromium on PATH."""
    return os.environ.get("LITENET_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def cannot_run(reason: str):
    """Skip, or fail where the browser tests are required."""
    message = f"Chromium cannot run here: {reason}"
    if os.environ.get("LITENET_REQUIRE_BROWSER") == "1":
        pytest.fail(message + " (LITENET_REQUIRE_BROWSER=1: apt-get install chromium; pip install 'litenet-nn[studio-test]')")
    pytest.skip(message)


def launch(playwright):
    """A headless Chromium, or a skip that says why none can run."""
    path = chromium_path()
    if path is None:
        cannot_run("no chromium on PATH (Debian: apt-get install chromium)")
    try:
        return playwright.chromium.launch(executable_path=path, args=ARGS)
    except Exception as exc:  # noqa: BLE001 - any launch failure means the same: no browser to test in
        cannot_run(f"{path} did not start ({str(exc).splitlines()[0]})")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        cannot_run("the playwright package is not installed (pip install 'litenet-nn[studio-test]')")
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


def screenshot(page, name: str) -> Path:
    """Keep a screenshot of the page as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_until(predicate, timeout: float = 60.0, what: str = "the condition"):
    """Poll `predicate` (e.g. the Python side's state) until it is true."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not hold within {timeout} s")
