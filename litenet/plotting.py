"""matplotlib for LiteNet's pictures: headless, and optional — without it a run still finishes, with one notice.

matplotlib comes with the train extra. An install without it (the export extra alone, say) must not
lose a finished training run or an evaluation to a missing picture, so every figure writer asks
here first and skips its PNG when the answer is None.
"""

from __future__ import annotations

import sys

from litenet.distribution import install_hint

NOTICE = ("litenet: matplotlib is not installed, so no pictures (PNG) are drawn; "
          f"{install_hint('train')} adds it")
_noticed = False


def pyplot():
    """matplotlib.pyplot on the headless Agg backend, or None when matplotlib cannot be imported
    (NOTICE is printed on stderr the first time, once per process)."""
    global _noticed
    try:
        import matplotlib
    except ImportError:
        if not _noticed:
            print(NOTICE, file=sys.stderr, flush=True)
            _noticed = True
        return None
    matplotlib.use("Agg")  # no display on servers, CI or a Pi
    import matplotlib.pyplot as plt

    return plt
