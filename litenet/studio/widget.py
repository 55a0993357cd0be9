"""The Studio in a notebook (JupyterLab, Notebook, VS Code): an anywidget whose front end is the same module
`litenet studio` serves, talking to the same Controller through the widget's comm.

    from litenet.studio.widget import Studio
    studio = Studio()          # litenet-mixer-cpu on CIFAR-10, NumPy backend
    studio                      # shows it; studio.network is the LiveNetwork behind it
"""

from __future__ import annotations

import anywidget

from litenet.studio import frontend
from litenet.studio.controller import BLAS_THREADS, Controller
from litenet.studio.session import LiveNetwork, StudioData


class Studio(anywidget.AnyWidget):
    """LiteNet Studio as a widget; its Python side keeps running while the notebook's output is re-rendered."""

    _esm = frontend.esm()
    _css = frontend.css()

    def __init__(self, preset: str = "litenet-mixer-cpu", data: str | None = None, maps: str | None = None,
                 backend: str = "numpy", out: str = "runs/studio", live: LiveNetwork | None = None,
                 blas_threads: int = BLAS_THREADS, **kwargs):
        """blas_threads: the matrix products' threads while the Studio lives (the whole kernel's, as BLAS has one
        setting per process; restored when the widget is closed)."""
        super().__init__(**kwargs)
        live = live or LiveNetwork(StudioData.open(data, maps), preset, backend)
        self.controller = Controller(live, self._to_page, out, blas_threads).start()
        self.on_msg(self._from_page)

    @property
    def network(self) -> LiveNetwork:
        """The live network (read it from the notebook; the worker thread owns it while training)."""
        return self.controller.live

    def _from_page(self, widget, content, buffers) -> None:
        self.controller.post(content)

    def _to_page(self, message: dict) -> None:
        self.send(message)

    def close(self) -> None:
        self.controller.stop()
        super().close()
