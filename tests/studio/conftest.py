"""Fixtures of the Studio's tests: fake CIFAR-10 maps and a small layer-list network to build and train."""

import pytest

from cli_runs import fake_maps
from litenet.studio.session import LiveNetwork, StudioData

# patches → embedding → a Mixer block → LayerNorm → mean → an MLP block on the pooled vector → head
SMALL = [{"kind": "patches", "patch": 8, "input_shift": 0.47, "input_scale": 4.0}, {"kind": "embed", "width": 12},
         {"kind": "mixer_block", "token_hidden": 6, "channel_hidden": 24}, {"kind": "layernorm"},
         {"kind": "mean_tokens"}, {"kind": "mlp_block", "hidden": 16}, {"kind": "head"}]


@pytest.fixture(scope="session")
def maps(tmp_path_factory):
    return fake_maps(tmp_path_factory.mktemp("studio-cifar"))


@pytest.fixture(scope="session")
def data(maps):
    return StudioData.open(maps=str(maps))


@pytest.fixture
def live(data):
    """The small network with litenet-mixer-cpu's recipe at batch 16 (20 steps an epoch of the fake data)."""
    net = LiveNetwork(data, "litenet-mixer-cpu")
    net.build(SMALL)
    net.configure(batch_size=16)
    return net
