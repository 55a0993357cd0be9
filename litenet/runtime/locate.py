"""The model a runtime command uses: --model, else the default of model_choice.py, named on stderr."""

from __future__ import annotations

import sys

from litenet.runtime.model_choice import choose_model
from litenet.runtime.model_files import ModelFiles


def locate_model(given: str | None, prog: str) -> ModelFiles:
    """The ModelFiles of --model, else of the default; a default is named in one line on stderr (a model the
    user named is not repeated back: its errors stay one line, and --verbose names it)."""
    choice = choose_model(given, needs="onnx")
    model = ModelFiles.locate(choice.path)
    if given is None:
        print(choice.line(prog), file=sys.stderr, flush=True)
    return model
