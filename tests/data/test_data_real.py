"""One check against the real CIFAR-10, where this machine has it: the test batch reads right.

The copy is found the way `litenet data` finds it from the repository root ($LITENET_DATA, ./data,
../shared/data; either layout or the official archive), never downloaded; without one the test skips.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from litenet.data.locate import DEFAULT_PLACES, find_in
from litenet.data.readers import CLASS_NAMES, LAYOUTS, parse_batch
from litenet.data.source import open_source

REPO = Path(__file__).resolve().parents[2]


def real_cifar10() -> tuple[Path | None, str]:
    """(the CIFAR-10 folder or archive, "") or (None, why none was found), in locate_source's order."""
    named = os.environ.get("LITENET_DATA")
    places = [Path(named)] if named else [REPO / place for place in DEFAULT_PLACES]
    for place in places:
        found = find_in(place)
        if found is not None:
            return found, ""
    where = f"LITENET_DATA={named}" if named else " or ".join(str(p) for p in places)
    return None, f"no real CIFAR-10 in {where} (searched as litenet data searches, from the repository root)"


# Read before the data tests' autouse fixture clears LITENET_DATA and moves to a scratch folder.
SOURCE, WHY_NOT = real_cifar10()


@pytest.mark.skipif(SOURCE is None, reason=WHY_NOT)
def test_the_real_test_batch_reads_right():
    with open_source(SOURCE) as src:
        name = LAYOUTS[src.layout]["test"]
        (_, data), = src.read_many([name])
    images, labels = parse_batch(src.layout, data, name)
    assert images.shape == (10000, 32, 32, 3) and images.dtype == np.uint8 and labels.shape == (10000,)
    # The first test images are the well-known cat, ship, ship, airplane, frog, ...
    assert [CLASS_NAMES[k] for k in labels[:5]] == ["cat", "ship", "ship", "airplane", "frog"]
    # Pixels (row, column) → RGB of the cat, as the official files hold them (planar R, G, B rows).
    for (row, col), rgb in {(0, 0): [158, 112, 49], (5, 20): [122, 121, 120], (31, 31): [21, 67, 110]}.items():
        assert images[0, row, col].tolist() == rgb
    assert np.bincount(labels, minlength=10).tolist() == [1000] * 10
