"""The Studio's front end: one module in anywidget's format (`export default { render({ model, el }) }`),
assembled from the parts in static/ in a fixed order, and its style sheet.

The parts are plain JavaScript written for this project (no framework, nothing fetched at run time: the
page works offline); each part defines functions for those after it, and the last one exports the
widget. Assembling is concatenation in PARTS order, so the module is the same bytes on every machine.
"""

from __future__ import annotations

import functools
from pathlib import Path

STATIC = Path(__file__).with_name("static")
PARTS = ("util.js", "build.js", "graph.js", "charts.js", "inspect.js", "images.js", "app.js")


def read(name: str) -> str:
    """A file of static/ as text."""
    return (STATIC / name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def esm() -> str:
    """The widget module: the parts, each under a comment naming it."""
    return "\n".join(f"// ---- litenet/studio/static/{name} ----\n{read(name)}" for name in PARTS)


@functools.lru_cache(maxsize=1)
def css() -> str:
    return read("studio.css")
