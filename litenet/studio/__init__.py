"""LiteNet Studio: build a network by connecting layers, train it on CIFAR-10, and watch every gradient flow.

One front-end module in anywidget's format (static/, assembled by frontend.py) is shown by two hosts:
anywidget in a notebook (widget.py: `from litenet.studio import Studio; Studio()`) and `litenet studio`,
a page of its own served on 127.0.0.1 (server.py). Both talk to the same Python side: a LiveNetwork
(session.py) driven by a Controller (controller.py) on one worker thread. docs/studio.md.
"""
