"""bench_steps_gpu.py's table, without a GPU: the Mixer's rows set LiteNet against both PyTorch forms
(its eager step in a CUDA graph, and the peer of record: torch.compile in one graph of the whole step),
the MLP rows against the one they have, and a form that failed neither counts nor goes unreported."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_steps_gpu import line, render  # noqa: E402

FLOOR = {"ms": 1.0, "flop_ms": 1.0, "byte_ms": 0.1, "bound": "FLOP"}


def cell(model, precision, litenet, graph, peer=None):
    def measured(ms):
        return {"ms": ms} if isinstance(ms, float) else {"error": ms}
    out = {"model": model, "batch": 128, "precision": precision, "litenet": measured(litenet),
           "torch_graph": measured(graph), "floor": FLOOR}
    out["torch_peer"] = {} if peer is None else measured(peer)
    if isinstance(peer, float):
        out["torch_peer"]["setup_seconds"] = 41.0
    return out


def table(*cells):
    result = {"gpu": "GPU", "cupy": "c", "torch": "t", "repeats": 3, "steps": 12, "seconds": 1.0, "cells": list(cells)}
    return {c.split(" | ")[0].lstrip("| ") + " " + c.split(" | ")[2]: c for c in render(result).splitlines()
            if c.startswith("| ") and "---" not in c and "model" not in c}, render(result)


def test_the_mixers_rows_take_both_pytorch_forms_and_ahead_means_ahead_of_both():
    rows, text = table(cell("litenet-mixer", "bf16", 2.0, 3.0, 1.5), cell("litenet-mixer", "fp32", 2.0, 3.0, 4.0),
                       cell("width 256", "fp32", 2.0, 3.0))
    assert "| 1.500 | 1.50 / 0.75 | **no** |" in rows["litenet-mixer BF16"]  # the compiled graph is the faster
    assert "| 4.000 | 1.50 / 2.00 | yes |" in rows["litenet-mixer fp32"]
    assert "| 3.000 | — | 1.50 | yes |" in rows["width 256 fp32"]  # no peer of record for the MLP
    assert "litenet-mixer, batch 128, bf16: 41.0 s" in text  # its one-time cost, apart


def test_a_pytorch_form_that_failed_is_reported_and_marks_ahead_as_of_those_timed():
    rows, text = table(cell("litenet-mixer", "fp32", 2.0, 3.0, "RuntimeError: capture failed"))
    assert "| error | 1.50 | yes † |" in rows["litenet-mixer fp32"]
    assert "- litenet-mixer, batch 128, fp32, torch_peer: RuntimeError: capture failed" in text
    assert "compiled graph error," in line(cell("litenet-mixer", "fp32", 2.0, 3.0, "RuntimeError: capture failed"))
