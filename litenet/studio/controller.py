"""The Studio's Python side as a message handler: the page's requests in, updates out, on one worker thread.

Both hosts (server.py's page, widget.py's notebook widget) hand every message from the page to `post` and
give a `send` callable for the replies. The worker owns the LiveNetwork: it handles messages between
training steps, so nothing else touches the network, and a closed page loses nothing (a new one says
hello and receives the whole state). A user mistake is answered with one line; an internal error too,
its traceback going to the server's stderr, and the page lives on.
"""

from __future__ import annotations

import base64
import io
import math
import queue
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from litenet.errors import LiteNetError
from litenet.model import preset_names
from litenet.studio import formulas, takeout, views, walk
from litenet.studio.session import LiveNetwork

# The Studio's matrix products run on one BLAS thread: the page, the browser and the server share the cores, and
# OpenBLAS's second thread spins while it waits, so a step slows several-fold whenever another process holds a
# core (docs/decisions.md). Process-wide while the Studio's worker runs; `blas_threads` changes it.
BLAS_THREADS = 1
SUMMARY_EVERY = 0.25  # seconds between two inspected steps while running: the page's edge norms refresh 4×/s
NO_REPLY = object()


def clean(value):
    """JSON-safe: NaN and ±Inf become None (JSON has neither), tuples lists; everything else as is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


class Controller:
    """Runs `live` on a worker thread: `post` a message from any thread; replies go to `send(dict)`."""

    def __init__(self, live: LiveNetwork, send, out: str | Path = "runs/studio", blas_threads: int = BLAS_THREADS):
        self.live, self._send, self.out = live, send, Path(out)
        self.blas_threads = blas_threads
        self.running = False
        self.updates = 0  # progress messages sent (the benchmark counts them)
        self._queue: queue.Queue = queue.Queue()
        self._last_summary = 0.0
        self._thread = threading.Thread(target=self._work, name="litenet-studio", daemon=True)
        self._stopped = False

    def start(self) -> Controller:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Finish the message in hand and end the worker."""
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout=30)

    def post(self, message: dict) -> None:
        self._queue.put(message)

    def send(self, message: dict) -> None:
        self._send(clean(message))

    # -- the worker ----------------------------------------------------------------------------------

    def _work(self) -> None:
        # NaN and Inf are the page's to report (an alarm on the op), not NumPy warnings on the terminal
        with threadpool_limits(limits=self.blas_threads, user_api="blas"), \
                np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            while not self._stopped:
                try:
                    message = self._queue.get(block=not self.running)
                except queue.Empty:
                    self._train_one()
                    continue
                if message is not None:
                    self._handle(message)

    def _handle(self, message: dict) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        handler = getattr(self, f"on_{kind}", None) if isinstance(kind, str) else None
        try:
            if handler is None:
                raise LiteNetError(f"unknown request {kind!r}")
            reply = handler(message)
        except LiteNetError as exc:
            reply = {"type": "error", "message": str(exc)}
        except Exception as exc:  # noqa: BLE001 - an internal bug: logged in full, the page told in one line
            traceback.print_exc(file=sys.stderr)
            reply = {"type": "error", "message": f"internal error in {kind} ({type(exc).__name__}: {exc}); "
                                                 "the Studio keeps its state"}
        if reply is not NO_REPLY:
            if "id" in message:
                reply["id"] = message["id"]
            reply.setdefault("request", kind)
            self.send(reply)

    def _train_one(self) -> None:
        """One step while running; stop at an alarm, at the recipe's last step, or on an error."""
        live = self.live
        if live.steps >= live.total_steps:
            self.running = False
            self.send({"type": "paused", "reason": f"the recipe's {live.train.epochs} epochs are done "
                                                   "(raise epochs to go on)", "steps": live.steps})
            return
        inspect = time.perf_counter() - self._last_summary >= SUMMARY_EVERY
        try:
            self._progress(live.step(inspect=inspect), inspect)
        except Exception as exc:  # noqa: BLE001
            self.running = False
            if not isinstance(exc, LiteNetError):
                traceback.print_exc(file=sys.stderr)
            self.send({"type": "error", "message": f"training stopped: {exc}"})

    def _progress(self, record: dict, inspected: bool) -> None:
        if "alarm" in record:
            self.running = False
            self.send({"type": "alarm", **record["alarm"]})
            return
        message = {"type": "progress", "record": record, "running": self.running,
                   "total_steps": self.live.total_steps}
        if inspected:
            self._last_summary = time.perf_counter()
            message["inspection"] = self.live.inspector.last
        self.updates += 1
        self.send(message)

    # -- requests: the network -----------------------------------------------------------------------

    def state(self) -> dict:
        return {"type": "state", **self.live.describe(), "running": self.running, "presets": preset_names(),
                "inspection": self.live.inspector.last, "selected": self.live.inspector.selected,
                "out": str(self.out)}

    def on_hello(self, message):
        if self.live.inspector.last is None:
            self.live.probe()
        return self.state()

    def on_check(self, message):
        return {"type": "checked", "result": self.live.check(message.get("layers", []))}

    def on_build(self, message):
        self.running = False
        self.live.build(message.get("layers", []))
        self.live.probe()
        return self.state()

    def on_load_preset(self, message):
        self.running = False
        self.live.load_preset(str(message.get("name", "")))
        self.live.probe()
        return self.state()

    def on_save_preset(self, message):
        path = self.live.save_preset(self.out / "presets", str(message.get("name", "")), str(message.get("description", "")),
                                     message.get("layers"))
        return {"type": "saved", "path": str(path), "command": f"litenet train --preset {path}", "name": self.live.name}

    # -- requests: training ----------------------------------------------------------------------------

    def on_configure(self, message):
        self.live.configure(**message.get("settings", {}))
        return self.state()

    def on_step(self, message):
        self.running = False
        for i in range(max(1, min(int(message.get("count", 1)), 1000))):
            record = self.live.step(inspect=True)
            self._progress(record, True)
            if "alarm" in record:
                break
        return NO_REPLY

    def on_run(self, message):
        self.live.alarm = None  # Run after an alarm: the user has changed something, or tries again
        self.running = True
        return {"type": "running", "running": True}

    def on_pause(self, message):
        self.running = False
        return {"type": "paused", "reason": "paused", "steps": self.live.steps}

    def on_reset(self, message):
        self.running = False
        self.live.reset()
        self.live.probe()
        return self.state()

    # -- requests: looking inside ------------------------------------------------------------------------

    def on_select(self, message):
        name = message.get("op")
        op = next((o for o in self.live.ops if o.name == name), None)
        if op is None:
            raise LiteNetError(f"no op {name!r} in this network")
        self.live.inspector.selected = name
        if not self.running:
            self.live.probe()
        return {"type": "op", "op": name, "details": formulas.describe(op), "inspection": self.live.inspector.last}

    def on_value(self, message):
        value = self.live.value(str(message.get("op")), str(message.get("param", "weight")),
                                int(message.get("row", 0)), int(message.get("col", 0)))
        return {"type": "value", "op": message.get("op"), "param": message.get("param", "weight"),
                "row": message.get("row"), "col": message.get("col"), "value": value}

    def on_tensor(self, message):
        """A whole tensor as a .npy file's bytes (base64): what the page's download button asks for."""
        op, which = str(message.get("op")), str(message.get("which", "weight"))
        value = self.live.tensor(op, which)
        buffer = io.BytesIO()
        np.save(buffer, value)
        return {"type": "tensor", "op": op, "which": which, "shape": list(value.shape),
                "npy": base64.b64encode(buffer.getvalue()).decode("ascii")}

    def on_walk(self, message):
        return {"type": "walk", **walk.walk(self.live, int(message.get("index", 0)))}

    # -- requests: data and export -------------------------------------------------------------------------

    def on_gallery(self, message):
        return {"type": "gallery", "images": views.gallery(self.live, int(message.get("page", 0)))}

    def on_explain(self, message):
        if "data" in message:
            try:
                data = base64.b64decode(str(message["data"]).split(",")[-1], validate=True)
            except ValueError:
                raise LiteNetError(f"{message.get('filename', 'the file')}: the page sent it garbled; drop it again") from None
            return {"type": "explanation", **views.explain_upload(self.live, data, str(message.get("filename", "")))}
        return {"type": "explanation", **views.explain_test(self.live, int(message.get("index", 0)))}

    def on_confusion(self, message):
        return {"type": "confusion", **views.confusion(self.live)}

    def on_export(self, message):
        self.running = False
        folder = self.out / "models" / self.live.name
        result = takeout.export(self.live, folder, bool(message.get("int8", False)),
                                log=lambda line: self.send({"type": "log", "line": line}))
        return {"type": "exported", **result}
