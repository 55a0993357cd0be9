"""A tour of LiteNet Studio on CIFAR-10, driven in Chromium as a person would (`make studio-figures`): compose a
network by dragging layers and wiring them, build it, save it as a preset, train it, click an op, walk an
image, look at the images, export it — a screenshot of each view into docs/figures/studio/.

The network composed is models/litenet-mixed-cpu.toml's: litenet-mixer-cpu's patches and embedding, two
Mixer blocks, LayerNorm and the mean over the patches, then a residual MLP block on the pooled vector.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from litenet.studio.controller import Controller  # noqa: E402
from litenet.studio.server import StudioServer  # noqa: E402
from litenet.studio.session import LiveNetwork, StudioData  # noqa: E402

MIXED = [{"kind": "patches", "patch": 4, "input_shift": 0.47, "input_scale": 4.0}, {"kind": "embed", "width": 64},
         {"kind": "mixer_block", "token_hidden": 32, "channel_hidden": 128},
         {"kind": "mixer_block", "token_hidden": 32, "channel_hidden": 128}, {"kind": "layernorm"},
         {"kind": "mean_tokens"}, {"kind": "mlp_block", "hidden": 128}, {"kind": "head"}]
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def compose(page, layers: list[dict]) -> None:
    """Clear the canvas, drop each layer from the palette, set its settings, wire each to the next."""
    for close in page.locator(".ls-canvas .ls-x").all()[::-1]:
        close.click()
    for i, layer in enumerate(layers):
        page.drag_and_drop(f".ls-palette-item[data-kind={layer['kind']}]", ".ls-canvas",
                           target_position={"x": 130 + 240 * (i % 4), "y": 40 + 175 * (i // 4)})
        node = page.locator(".ls-canvas .ls-node").nth(i)
        for key, value in layer.items():
            if key == "kind":
                continue
            field = node.locator(f"[data-setting={key}]")
            if field.evaluate("e => e.tagName") == "SELECT":
                field.select_option(str(value))
            else:
                field.fill(str(value))
    nodes = page.locator(".ls-canvas .ls-node")
    for i in range(len(layers) - 1):
        start = nodes.nth(i).locator(".ls-out").bounding_box()
        end = nodes.nth(i + 1).locator(".ls-in").bounding_box()
        page.mouse.move(start["x"] + 6, start["y"] + 6)
        page.mouse.down()
        page.mouse.move(end["x"] + 6, end["y"] + 6, steps=6)
        page.mouse.up()
    page.wait_for_selector(".ls-ok", timeout=60_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures/studio")
    parser.add_argument("--steps", type=int, default=150, help="steps to train before the Train view's picture")
    parser.add_argument("--data")
    parser.add_argument("--maps")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    live = LiveNetwork(StudioData.open(args.data, args.maps), "litenet-mixer-cpu")
    server = None
    controller = Controller(live, lambda m: server.hub.send(m), "runs/studio")
    server = StudioServer(controller, 0).start()
    controller.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.goto(server.url)
            page.wait_for_function("globalThis.litenetStudio && globalThis.litenetStudio.state", timeout=120_000)
            compose(page, MIXED)
            page.click("[data-testid=build]")
            page.wait_for_function("globalThis.litenetStudio.state.name === 'studio-network'", timeout=120_000)
            page.fill("[data-testid=preset-name]", "litenet-mixed-cpu")
            page.click("[data-testid=save-preset]")
            page.wait_for_selector("[data-testid=saved]", timeout=60_000)
            print(page.locator("[data-testid=saved]").inner_text())
            page.click("[data-testid=banner] button")
            page.screenshot(path=str(out / "build.png"), full_page=True)

            page.click("[data-tab=train]")
            page.click("[data-testid=run]")
            while live.steps < args.steps:
                time.sleep(0.5)
            page.click("[data-testid=pause]")
            page.wait_for_function("!globalThis.litenetStudio.running", timeout=60_000)
            time.sleep(1)
            page.screenshot(path=str(out / "train.png"), full_page=True)

            page.click(".ls-train g[data-op='blocks.1.channel_fc1']")
            matrix = page.locator("[data-testid=matrix-weight]")
            matrix.wait_for(timeout=120_000)
            matrix.scroll_into_view_if_needed()
            box = matrix.bounding_box()
            matrix.hover(position={"x": box["width"] * 0.3, "y": box["height"] * 0.6})
            page.wait_for_function("document.querySelector('[data-testid=value-weight]').textContent.includes('] = ')")
            page.screenshot(path=str(out / "inspect-weights.png"))
            page.click("[data-testid=walk]")
            page.wait_for_selector(".ls-op.ls-walk-forward", timeout=60_000)
            for _ in range(12):
                page.click("[data-testid=walk-next]")
            page.screenshot(path=str(out / "inspect.png"), full_page=True)

            page.click("[data-tab=images]")
            page.locator(".ls-thumb").nth(3).click()
            page.wait_for_selector("[data-testid=saliency]", timeout=60_000)
            page.click("[data-testid=score]")
            page.wait_for_selector("[data-testid=confusion]", timeout=120_000)
            page.screenshot(path=str(out / "images.png"), full_page=True)

            page.click("[data-tab=export]")
            page.check("[data-testid=int8]")
            page.click("[data-testid=export]")
            page.wait_for_selector("[data-testid=exported] table", timeout=600_000)
            page.screenshot(path=str(out / "export.png"), full_page=True)
            print(page.locator("[data-testid=exported]").inner_text())
            browser.close()
    finally:
        controller.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
