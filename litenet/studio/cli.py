"""`litenet studio`: LiteNet Studio in a page of its own on 127.0.0.1, opened in the browser."""

from __future__ import annotations

import sys
import webbrowser

from litenet.errors import UsageError


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default="litenet-mixer-cpu", help="the network to start from (default litenet-mixer-cpu)")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free port)")
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cuda"],
                        help="training backend (numpy; cuda for the mlp and mixer families where CuPy sees a GPU)")
    parser.add_argument("--out", default="runs/studio", help="where saved presets and exported models go (default runs/studio)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="threads of the matrix products (default 1: the page and the browser share the cores)")
    parser.add_argument("--no-browser", action="store_true", help="print the address only")
    parser.add_argument("--data", help="CIFAR-10 folder or archive (default: LITENET_DATA, ./data, ../shared/data, download)")
    parser.add_argument("--maps", help="folder of the converted memory maps (default ./data/cifar10-maps)")


def run(args) -> int:
    from litenet.studio.controller import Controller
    from litenet.studio.server import StudioServer
    from litenet.studio.session import LiveNetwork, StudioData

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: give a port in 0 … 65535")
    from litenet.limits import MAX_THREADS

    if not 1 <= args.blas_threads <= MAX_THREADS:
        raise UsageError(f"--blas-threads {args.blas_threads}: give 1 … {MAX_THREADS}")
    live = LiveNetwork(StudioData.open(args.data, args.maps), args.preset, args.backend)
    server = None
    controller = Controller(live, lambda message: server.hub.send(message), args.out, args.blas_threads)
    server = StudioServer(controller, args.port).start()
    controller.start()
    print(f"litenet studio: {live.name} on {len(live.data.train_images):,} training images; open {server.url} "
          "(Ctrl-C stops it)", flush=True)
    if not args.no_browser and not webbrowser.open(server.url):
        print(f"litenet studio: no browser could be opened here; open {server.url} yourself", file=sys.stderr)
    try:
        server.wait()
    finally:
        controller.stop()
        server.stop()
    return 0
