"""The report's statistics: the image-by-image comparison with the peer quantizer."""

import numpy as np
import pytest

from litenet.export.report import paired_comparison


def test_mcnemar_exact_p_value():
    ours = np.array([True] * 10 + [False] * 0 + [True] * 5)
    theirs = np.array([False] * 10 + [True] * 5)
    result = paired_comparison(ours, theirs)
    assert (result["only_ours"], result["only_peer"]) == (10, 0)
    assert result["p"] == pytest.approx(2 / 2**10)  # all ten disagreements one way
    assert paired_comparison(ours, ours)["p"] == 1.0  # no disagreement, no evidence
