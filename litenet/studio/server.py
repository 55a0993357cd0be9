"""`litenet studio`'s host: the Studio's one front-end module in a page of its own, served by aiohttp on
127.0.0.1, its messages over a WebSocket to the Controller.

The page (static/page.html, static/page.js) gives the widget module a `model` with anywidget's methods
(`send`, `on("msg:custom")`) over the WebSocket, so the module cannot tell this host from a notebook.
Any number of tabs may be open; a closed or reloaded tab loses nothing (the state lives here), and a
page reconnects by itself. Only pages from this server may connect (the Origin and Host are checked),
so another web site open in the same browser cannot drive the Studio.
"""

from __future__ import annotations

import asyncio
import json
import threading

from aiohttp import WSMsgType, web

from litenet.studio import frontend

HOST = "127.0.0.1"  # never another interface: the Studio runs code and writes files on the user's behalf
MAX_MESSAGE = 32 * 1024 * 1024  # bytes: a dropped image arrives base64-encoded in one message


class Hub:
    """The open pages' WebSockets; `send` may be called from any thread (the Controller's worker)."""

    def __init__(self):
        self.sockets: set[web.WebSocketResponse] = set()
        self.loop: asyncio.AbstractEventLoop | None = None

    def send(self, message: dict) -> None:
        if self.loop is None or self.loop.is_closed():
            return
        text = json.dumps(message, allow_nan=False)
        self.loop.call_soon_threadsafe(self._broadcast, text)

    def _broadcast(self, text: str) -> None:
        for ws in list(self.sockets):
            if not ws.closed:
                asyncio.ensure_future(ws.send_str(text))


def make_app(controller, hub: Hub) -> web.Application:
    """The page, the widget module, its styles, and the WebSocket."""
    app = web.Application(client_max_size=MAX_MESSAGE)

    def static(name: str, content_type: str):
        async def handler(request):
            return web.Response(text=frontend.read(name), content_type=content_type,
                                headers={"Cache-Control": "no-store"})
        return handler

    async def styles(request):
        return web.Response(text=frontend.css(), content_type="text/css", headers={"Cache-Control": "no-store"})

    async def module(request):
        return web.Response(text=frontend.esm(), content_type="text/javascript", headers={"Cache-Control": "no-store"})

    async def socket(request):
        if not _same_origin(request):
            raise web.HTTPForbidden(text="the Studio takes connections from its own page only")
        ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, heartbeat=20)
        await ws.prepare(request)
        hub.sockets.add(ws)
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    try:
                        controller.post(json.loads(msg.data))
                    except json.JSONDecodeError:
                        await ws.send_str(json.dumps({"type": "error", "message": "the page sent a garbled message"}))
        finally:
            hub.sockets.discard(ws)
        return ws

    app.router.add_get("/", static("page.html", "text/html"))
    app.router.add_get("/page.js", static("page.js", "text/javascript"))
    app.router.add_get("/studio.css", styles)
    app.router.add_get("/studio.js", module)
    app.router.add_get("/ws", socket)
    return app


def _same_origin(request) -> bool:
    """A WebSocket from this server's own page: Host is the loopback address we serve, Origin the same."""
    host = request.headers.get("Host", "")
    origin = request.headers.get("Origin")
    loopback = host.split(":")[0] in (HOST, "localhost")
    return loopback and (origin is None or origin in (f"http://{host}",))


class StudioServer:
    """The server on its own thread and event loop: `start()` returns once it listens; `url`; `stop()`."""

    def __init__(self, controller, port: int = 0):
        self.controller, self.port = controller, port
        self.hub = Hub()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="litenet-studio-server", daemon=True)
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def start(self) -> StudioServer:
        self._thread.start()
        self._ready.wait(timeout=60)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self.hub.loop is not None and self._stop is not None:
            self.hub.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def wait(self) -> None:
        """Block until the server stops (Ctrl-C in the caller's thread ends it)."""
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.hub.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        runner = web.AppRunner(make_app(self.controller, self.hub), access_log=None)
        try:
            await runner.setup()
            site = web.TCPSite(runner, HOST, self.port)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # the port the system chose for port 0
        except OSError as exc:
            from litenet.errors import LiteNetError
            self._error = LiteNetError(f"cannot listen on {HOST}:{self.port} ({exc.strerror or exc}); "
                                       "choose another --port")
            self._ready.set()
            await runner.cleanup()
            return
        self._ready.set()
        await self._stop.wait()
        for ws in list(self.hub.sockets):
            await ws.close()
        await runner.cleanup()
