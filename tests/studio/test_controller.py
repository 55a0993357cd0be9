"""The Studio's message handler (the page's requests in, replies out, one worker thread) and its page host."""

import asyncio
import json
import queue
import time

import pytest

from conftest import SMALL
from litenet.studio import frontend
from litenet.studio.controller import Controller, clean
from litenet.studio.server import StudioServer


class Page:
    """Stands in for a page: collects what the Controller sends."""

    def __init__(self):
        self.messages: queue.Queue = queue.Queue()

    def __call__(self, message):
        json.dumps(message, allow_nan=False)  # what the hosts send must be plain JSON
        self.messages.put(message)

    def wait(self, kind: str, timeout: float = 60.0, where=lambda m: True) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                message = self.messages.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if message["type"] == kind and where(message):
                return message
        raise AssertionError(f"no {kind!r} message within {timeout} s")


@pytest.fixture
def studio(live, tmp_path):
    page = Page()
    controller = Controller(live, page, tmp_path / "studio").start()
    yield controller, page
    controller.stop()


def test_hello_gets_the_whole_state(studio):
    controller, page = studio
    controller.post({"type": "hello", "id": 7})
    state = page.wait("state")
    assert state["id"] == 7 and state["layers"][2]["kind"] == "mixer_block" and state["inspection"]["edges"]
    assert "litenet-mixer-cpu" in state["presets"] and not state["running"]


def test_check_build_and_a_bad_build(studio):
    controller, page = studio
    controller.post({"type": "check", "layers": SMALL[:2] + [{"kind": "head"}]})
    checked = page.wait("checked")["result"]
    assert not checked["ok"] and "add mean_tokens before it" in checked["layers"][2]["problem"]
    controller.post({"type": "build", "layers": SMALL[:2] + [{"kind": "head"}]})
    error = page.wait("error")
    assert error["request"] == "build" and error["message"].startswith("layer 3 (head): needs a vector")
    controller.post({"type": "build", "layers": SMALL[:5] + [{"kind": "head"}]})
    assert [op["name"] for op in page.wait("state")["ops"]][-2:] == ["pool", "head"]


def test_step_run_pause_and_a_reconnecting_page_sees_the_curves(studio):
    controller, page = studio
    controller.post({"type": "step", "count": 2})
    assert page.wait("progress")["record"]["step"] == 1
    assert page.wait("progress")["inspection"]["edges"]
    controller.post({"type": "run"})
    page.wait("progress", where=lambda m: m["record"]["step"] >= 6)
    controller.post({"type": "pause"})
    page.wait("paused")
    steps = controller.live.steps
    time.sleep(0.3)
    assert controller.live.steps == steps and not controller.running
    controller.post({"type": "hello"})  # a reloaded tab
    state = page.wait("state")
    assert state["steps"] == steps and state["curves"]["step"][-1] == steps


def test_run_stops_at_the_end_of_the_recipe(studio):
    controller, page = studio
    controller.post({"type": "configure", "settings": {"epochs": 1}})
    page.wait("state")
    controller.post({"type": "run"})
    paused = page.wait("paused")
    assert "epochs are done" in paused["reason"] and controller.live.steps == controller.live.total_steps


def test_a_nan_pauses_training_and_names_the_op(studio):
    controller, page = studio
    from litenet.model import param_views
    param_views(controller.live.backend.params, controller.live.model)["embed.weight"][:] = float("nan")
    controller.post({"type": "run"})
    alarm = page.wait("alarm")
    assert alarm["op"] == "embed" and alarm["stage"] == "forward" and not controller.running


def test_select_value_and_walk(studio):
    controller, page = studio
    controller.post({"type": "select", "op": "blocks.0.channel_fc1"})
    op = page.wait("op")
    assert op["details"]["forward"]["source"][0]["file"] == "litenet/ops.py"
    assert op["details"]["backward"]["function"] == "ops.linear_backward"
    assert op["inspection"]["selected"]["op"] == "blocks.0.channel_fc1"
    controller.post({"type": "value", "op": "blocks.0.channel_fc1", "param": "weight", "row": 1, "col": 2})
    assert isinstance(page.wait("value")["value"], float)
    controller.post({"type": "walk", "index": 3})
    steps = page.wait("walk")["steps"]
    ops = controller.live.ops
    backward = [o.name for o in reversed(ops) if o.kind != "patches"]  # no ∂ of the images is asked for
    assert [s["op"] for s in steps] == [o.name for o in ops] + ["loss"] + backward


def test_images_views_and_an_unreadable_upload(studio):
    controller, page = studio
    controller.post({"type": "gallery"})
    assert len(page.wait("gallery")["images"]) == 24
    controller.post({"type": "explain", "index": 5})
    explanation = page.wait("explanation")
    assert len(explanation["top"]) == 3 and explanation["saliency"].startswith("data:image/png;base64,")
    controller.post({"type": "explain", "data": "data:image/png;base64,bm90IGFuIGltYWdl", "filename": "cat.png"})
    assert page.wait("error")["message"] == "cat.png: not an image file Pillow can read"
    controller.post({"type": "confusion"})
    confusion = page.wait("confusion")
    assert sum(map(sum, confusion["matrix"])) == confusion["images"] == 64 and len(confusion["worst"]) == 12


def test_user_and_internal_errors_are_one_line_and_the_worker_lives_on(studio, monkeypatch, capsys):
    controller, page = studio
    controller.post({"type": "warp"})
    assert page.wait("error")["message"] == "unknown request 'warp'"
    monkeypatch.setattr("litenet.studio.views.gallery", lambda live, page: 1 / 0)
    controller.post({"type": "gallery"})
    message = page.wait("error")["message"]
    assert message.startswith("internal error in gallery (ZeroDivisionError") and "\n" not in message
    assert "Traceback" in capsys.readouterr().err  # the whole story goes to the server's stderr
    controller.post({"type": "hello"})
    page.wait("state")


def test_clean_makes_json_of_non_finite_numbers():
    assert clean({"a": [float("nan"), 1.5, (float("inf"),)]}) == {"a": [None, 1.5, [None]]}


def test_the_page_host_serves_the_module_and_answers_on_its_websocket(live, tmp_path):
    import aiohttp

    server = None
    controller = Controller(live, lambda m: server.hub.send(m), tmp_path / "studio")
    server = StudioServer(controller, 0).start()
    controller.start()

    async def talk():
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url) as r:
                assert r.status == 200 and "/page.js" in await r.text()
            async with session.get(server.url + "studio.js") as r:
                assert await r.text() == frontend.esm()
            origin = {"Origin": server.url.rstrip("/")}
            async with session.ws_connect(server.url + "ws", headers=origin) as ws:
                await ws.send_str(json.dumps({"type": "hello"}))
                state = json.loads((await ws.receive(timeout=60)).data)
                assert state["type"] == "state"
            with pytest.raises(aiohttp.WSServerHandshakeError):
                await session.ws_connect(server.url + "ws", headers={"Origin": "http://evil.example"})
    try:
        asyncio.run(talk())
    finally:
        controller.stop()
        server.stop()


def test_the_module_is_one_anywidget_esm():
    module = frontend.esm()
    assert module.count("export default") == 1 and "render" in module
    assert "http://" not in module.replace("http://www.w3.org/2000/svg", "")  # nothing fetched from elsewhere
