"""`litenet studio`'s page in a real browser, end to end: build a network by dragging layers and connecting them,
train 20 steps, click an op and read its numbers, look at an image, export; reload and find it all still there.
The Python side is polled for every effect (the page only asks; Python holds the state)."""

import re

import numpy as np
import pytest

from browser import browser, screenshot, wait_until  # noqa: F401  (browser is a fixture)
from conftest import SMALL
from litenet.model import param_count, param_views
from litenet.studio.controller import Controller
from litenet.studio.server import StudioServer


@pytest.fixture
def served(data, tmp_path):
    from litenet.studio.session import LiveNetwork

    live = LiveNetwork(data, "litenet-mixer-cpu")
    live.configure(batch_size=16)
    server = None
    controller = Controller(live, lambda m: server.hub.send(m), tmp_path / "studio")
    server = StudioServer(controller, 0).start()
    controller.start()
    yield live, controller, server
    controller.stop()
    server.stop()


@pytest.fixture
def page(browser, served):  # noqa: F811
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served[2].url)
    page.wait_for_function("globalThis.litenetStudio && globalThis.litenetStudio.state", timeout=60_000)
    yield page
    context.close()
    assert errors == [], errors


def node(page, kind: str):
    return page.locator(f".ls-canvas .ls-node[data-kind={kind}]")


def connect(page, source: str, target: str):
    """Drag a wire from one layer's output port to another layer."""
    start = node(page, source).locator(".ls-out").bounding_box()
    end = node(page, target).locator(".ls-in").bounding_box()
    page.mouse.move(start["x"] + 6, start["y"] + 6)
    page.mouse.down()
    page.mouse.move((start["x"] + end["x"]) / 2, (start["y"] + end["y"]) / 2, steps=4)
    page.mouse.move(end["x"] + 6, end["y"] + 6, steps=4)
    page.mouse.up()


def test_build_train_inspect_look_and_export(page, served):
    live, controller, _ = served
    # -- build by dragging: clear the preset's layers, drop SMALL's, set their widths, connect them
    for close in page.locator(".ls-canvas .ls-x").all()[::-1]:
        close.click()
    assert page.locator(".ls-canvas .ls-node").count() == 0
    for i, layer in enumerate(SMALL):
        page.drag_and_drop(f".ls-palette-item[data-kind={layer['kind']}]", ".ls-canvas",
                           target_position={"x": 130 + 240 * (i % 4), "y": 40 + 170 * (i // 4)})
        for key, value in layer.items():
            field = node(page, layer["kind"]).locator(f"[data-setting={key}]")
            if key == "kind":
                continue
            if field.evaluate("e => e.tagName") == "SELECT":
                field.select_option(str(value))
            else:
                field.fill(str(value))
    connect(page, "patches", "embed")
    connect(page, "embed", "head")  # a mismatch first: the head needs a vector
    page.wait_for_function("[...document.querySelectorAll('.ls-wire-label.ls-bad')].some((label) => "
                           "label.textContent.includes('needs a vector (d,) but gets patch tokens (16, 12)'))",
                           timeout=30_000)
    assert page.locator(".ls-canvas .ls-node.ls-bad[data-kind=head]").count() == 1
    for source, target in zip([l["kind"] for l in SMALL[1:-1]], [l["kind"] for l in SMALL[2:]]):
        connect(page, source, target)  # embed → mixer_block replaces embed → head
    page.wait_for_selector(".ls-ok", timeout=30_000)
    build = page.locator("[data-testid=build]")
    assert page.locator("[data-testid=param-count]").inner_text() != "–"
    build.click()
    wait_until(lambda: live.model.family == "layers" and len(live.model.layers) == len(SMALL), what="the built network")
    shown = page.locator("[data-testid=param-count]").inner_text()
    assert shown == _count(param_count(live.model))
    screenshot(page, "build")

    # -- train 20 steps: Step, then Run, then Pause
    page.click("[data-tab=train]")
    page.click("[data-testid=step]")
    wait_until(lambda: live.steps >= 1, what="one step")
    page.click("[data-testid=run]")
    wait_until(lambda: live.steps >= 20, timeout=120, what="20 steps")
    page.click("[data-testid=pause]")
    wait_until(lambda: not controller.running, what="a pause")
    page.wait_for_function("!globalThis.litenetStudio.running && globalThis.litenetStudio.updates >= 20", timeout=30_000)
    assert re.search(r"step \d+/\d+ · loss", page.locator("[data-testid=train-status]").inner_text())
    screenshot(page, "train")

    # -- click an op and read its numbers
    page.click(".ls-train g[data-op='blocks.1.fc1']")
    page.wait_for_function("document.querySelector('[data-testid=op-details] h2')?.textContent === 'blocks.1.fc1'")
    details = page.locator("[data-testid=op-details]")
    details.locator(".ls-stats").first.wait_for(timeout=30_000)
    assert "∂x = ∂y Wᵀ" in details.inner_text() and "def linear_forward" in details.inner_text()
    assert live.inspector.selected == "blocks.1.fc1"
    matrix = page.locator("[data-testid=matrix-weight]")
    matrix.scroll_into_view_if_needed()
    box = matrix.bounding_box()
    matrix.hover(position={"x": box["width"] * 0.5, "y": box["height"] * 0.25})
    label = page.locator("[data-testid=value-weight]")
    page.wait_for_function("document.querySelector('[data-testid=value-weight]').textContent.includes('] = ')")
    row, col, value = re.search(r"\[(\d+), (\d+)\] = (\S+)", label.inner_text()).groups()
    assert float(value) == live.value("blocks.1.fc1", "weight", int(row), int(col))
    with page.expect_download() as download:
        details.locator("[data-download=weight]").click()
    np.testing.assert_array_equal(np.load(download.value.path()), param_views(live.params(), live.model)["blocks.1.fc1.weight"])
    page.click("[data-testid=walk]")
    page.wait_for_selector(".ls-op.ls-walk-forward", timeout=30_000)
    screenshot(page, "inspect")

    # -- an image: prediction, top 3, saliency; a file that is no image; the confusion matrix
    page.click("[data-tab=images]")
    page.locator(".ls-thumb").first.click()
    page.wait_for_selector("[data-testid=saliency]", timeout=30_000)
    assert page.locator("[data-testid=predicted]").inner_text() in live.data.classes
    page.set_input_files("[data-testid=upload]", files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"hello"}])
    page.wait_for_function("document.querySelector('[data-testid=banner]').textContent.includes('notes.png: not an image')")
    page.click("[data-testid=score]")
    page.wait_for_selector("[data-testid=confusion]", timeout=60_000)
    screenshot(page, "images")

    # -- export, and the command that runs it
    page.click("[data-tab=export]")
    page.click("[data-testid=export]")
    page.wait_for_selector("[data-testid=exported] table", timeout=120_000)
    exported = page.locator("[data-testid=exported]").inner_text()
    assert "model.onnx" in exported and "litenet-infer photo.jpg --model" in exported
    assert (controller.out / "models" / live.name / "model.onnx").is_file()
    screenshot(page, "export")

    # -- a reloaded tab finds the network and its training where they were
    steps = live.steps
    page.reload()
    page.wait_for_function("globalThis.litenetStudio && globalThis.litenetStudio.state", timeout=60_000)
    assert f"step {steps}/" in page.locator("[data-testid=status]").inner_text()
    assert page.locator(".ls-canvas .ls-node").count() == len(SMALL)


def test_a_nan_is_shown_on_its_op_and_training_pauses(page, served):
    live, controller, _ = served
    param_views(live.backend.params, live.model)["blocks.2.channel_fc2.weight"][1, 1] = float("inf")
    page.click("[data-tab=train]")
    page.click("[data-testid=run]")
    page.wait_for_selector("g.ls-op.ls-nan[data-op='blocks.2.channel_fc2']", timeout=60_000)
    assert "blocks.2.channel_fc2 is the first value that is not finite" in page.locator("[data-testid=banner]").inner_text()
    assert not controller.running and live.alarm["op"] == "blocks.2.channel_fc2"


def _count(n: int) -> str:
    """The page's fmtCount."""
    for size, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if n >= size:
            return f"{float(f'{n / size:.3g}'):g}{unit}"
    return str(n)
