"""The hand-set two-feature network of the insight tests: small enough to follow by hand
(tests/insight/test_insight_monitors.py works its gradients out). A module of its own, not conftest,
so a test's import cannot pick up another folder's conftest."""

from __future__ import annotations

import numpy as np

from litenet.model import ModelConfig, param_count, param_views

# Width 2, hidden 1, eps 3: small enough to follow by hand (tests/insight/test_insight_monitors.py).
HAND_MODEL = ModelConfig(embed="full", width=2, hidden=1, blocks=1, classes=2, ln_eps=3.0)


def hand_params() -> np.ndarray:
    """h0 = [2, 1] for the hand image; u = 0 (so GELU(u) = 0, GELU'(u) = ½); s = x + v = [2, 0]; z = [½, −½]."""
    flat = np.zeros(param_count(HAND_MODEL), np.float32)
    p = param_views(flat, HAND_MODEL)
    p["embed.weight"][0] = [2, 1]
    p["blocks.0.fc1.weight"][:, 0] = [1, -2]
    p["blocks.0.fc2.weight"][0] = [2, 0]
    p["blocks.0.fc2.bias"][:] = [0, -1]
    p["blocks.0.ln.gamma"][:] = 1
    p["head.weight"][:] = np.eye(2)
    return flat


def hand_image() -> np.ndarray:
    """One black image whose first pixel is pure red: the embedding input is s = [1, 0, 0, …]."""
    image = np.zeros((1, 32, 32, 3), np.uint8)
    image[0, 0, 0, 0] = 255
    return image
