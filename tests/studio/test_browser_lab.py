"""The Studio as a widget in JupyterLab, in a real browser: the same front-end module, shown by anywidget.
The notebook is driven through `window.jupyterapp.commands` (the app is exposed with
--LabApp.expose_app_in_browser=True), and the Python side is polled through the notebook's kernel, since
widget messages are buffered."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from browser import browser, screenshot, wait_until  # noqa: F401  (browser is a fixture)
from cli_runs import REPO
from conftest import SMALL

pytest.importorskip("anywidget", reason="the notebook host needs the studio extra (anywidget)")

# Runs code in the notebook's kernel and returns what it printed: how the test reads the Python side.
KERNEL_RUN = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code, store_history: false});
  let out = "";
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === "stream") out += msg.content.text;
    if (msg.header.msg_type === "error") out += "ERROR " + msg.content.ename + ": " + msg.content.evalue;
  };
  await future.done;
  return out;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, maps):
    """A JupyterLab server on 127.0.0.1 with a notebook that shows the Studio; stopped after the tests."""
    root = tmp_path_factory.mktemp("lab")
    code = (f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom litenet.studio.widget import Studio\n"
            f"studio = Studio(maps={str(maps)!r}, out={str(root / 'studio')!r})\n"
            f"studio.network.build({SMALL!r})\nstudio.network.configure(batch_size=16)\nstudio")
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": code}],
                "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
                "nbformat": 4, "nbformat_minor": 5}
    (root / "studio.ipynb").write_text(json.dumps(notebook))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_CONFIG_DIR": str(root / ".config"),
           "JUPYTER_RUNTIME_DIR": str(root / ".runtime"), "IPYTHONDIR": str(root / ".ipython")}
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
                             f"--port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
                             "--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True",
                             f"--ServerApp.root_dir={root}"], env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(url + "/api/status") or proc.poll() is not None, timeout=180, what="JupyterLab to start")
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited: {(root / 'lab.log').read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_the_widget_trains_and_inspects_in_jupyterlab(browser, lab):  # noqa: F811
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{lab}/lab/tree/studio.ipynb")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=180_000)
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready; }")
    python = lambda code: page.evaluate(KERNEL_RUN, code)  # noqa: E731
    page.evaluate("async () => { await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_function("globalThis.litenetStudio && globalThis.litenetStudio.state", timeout=180_000)
    assert python("print(studio.network.model.family, len(studio.network.model.layers))").split() == ["layers", str(len(SMALL))]

    widget = page.locator(".ls-studio")
    widget.locator("[data-tab=train]").click()
    widget.locator("[data-testid=step]").click()
    wait_until(lambda: int(python("print(studio.network.steps)")) >= 1, timeout=120, what="a step in the kernel")
    widget.locator("[data-testid=run]").click()
    wait_until(lambda: int(python("print(studio.network.steps)")) >= 10, timeout=180, what="10 steps in the kernel")
    widget.locator("[data-testid=pause]").click()
    wait_until(lambda: python("print(studio.controller.running)").strip() == "False", what="a pause in the kernel")
    page.wait_for_function("globalThis.litenetStudio.updates >= 10", timeout=60_000)

    widget.locator(".ls-train g[data-op='blocks.0.token_fc1']").click()
    wait_until(lambda: python("print(studio.network.inspector.selected)").strip() == "blocks.0.token_fc1",
               what="the op selected in the kernel")
    page.wait_for_function("document.querySelector('[data-testid=op-details] h2')?.textContent === 'blocks.0.token_fc1'",
                           timeout=60_000)
    details = widget.locator("[data-testid=op-details]")
    details.locator(".ls-stats").first.wait_for(timeout=60_000)
    assert "def token_linear_forward" in details.inner_text()
    screenshot(page, "jupyterlab")
    python("studio.close()")
    page.close()
    assert errors == [], errors
