"""The Studio's Python model of a live network: build, step, inspect, locate a NaN, save and load."""

import dataclasses

import numpy as np
import pytest

from conftest import SMALL
from litenet import graph
from litenet.errors import LiteNetError
from litenet.layers import LayerError
from litenet.model import init_params, load_preset, param_count, param_views, preset_to_toml
from litenet.studio import nan
from litenet.studio.inspector import identity_shares
from litenet.studio.session import EVAL_EVERY, LiveNetwork, check_layers
from litenet.train import augment, network, schedule
from litenet.train.numpy_backend import NumpyBackend


def test_build_takes_a_layer_list_and_refuses_a_bad_one_in_one_line(live):
    assert live.model.family == "layers" and live.steps == 0
    assert [op.name for op in live.ops][-2:] == ["blocks.1.ln", "head"]
    with pytest.raises(LayerError, match=r"^layer 3 \(head\): needs a vector \(d,\) but gets patch tokens"):
        live.build([SMALL[0], SMALL[1], {"kind": "head"}])
    assert live.model.family == "layers" and len(live.ops) == len(graph.ops_of(live.model))  # unchanged


def test_a_family_preset_stays_its_family_until_its_list_changes(data):
    live = LiveNetwork(data, "litenet-base")
    live.build([{"kind": "pixels", "embed": "full", "input_shift": 0.5, "name": "embed.rows"},
                {"kind": "embed", "width": 256, "bias": False}, {"kind": "mlp_block", "hidden": 512},
                {"kind": "mlp_block", "hidden": 512}, {"kind": "head"}])
    assert live.model == load_preset("litenet-base").model  # the same list: still the MLP family
    live.build(SMALL)
    assert live.model.family == "layers" and live.name == "studio-network"


def test_a_network_too_large_for_the_studio_is_refused_before_allocating(live):
    huge = [{"kind": "pixels"}, {"kind": "embed", "width": 65536}, {"kind": "head"}]
    with pytest.raises(LiteNetError, match="parameters: the Studio trains networks of up to"):
        live.build(huge)


def test_check_reports_shapes_parameters_and_flops_per_layer(live):
    result = check_layers(SMALL, 10, 1e-5)
    assert result["ok"] and result["params"] == param_count(live.model)
    assert result["layers"][0]["shape"] == [16, 192] and result["layers"][4]["shape"] == [12]
    assert result["flops"] == sum(graph.flops_per_image(live.ops).values())
    bad = check_layers([SMALL[0], {"kind": "mlp_block", "hidden": "wide"}, {"kind": "head"}], 10, 1e-5)
    assert not bad["ok"] and bad["layers"][1]["problem"] == "layer 2 (mlp_block): hidden must be int, got 'wide'"
    empty = check_layers([], 10, 1e-5)
    assert not empty["ok"] and empty["problem"].startswith("the layer list is empty")


def test_steps_are_litenet_trains_own(live, data):
    """The Studio's steps reach the same weights as the backend fed `litenet train`'s batches and draws."""
    for _ in range(3):
        live.step(inspect=True)
    twin = NumpyBackend(live.model, live.train, init_params(live.model, live.train.seed))
    twin.load_dataset(data.train_images, data.train_labels)
    batches = schedule.epoch_batches(len(data.train_images), live.train, 0)[:3]
    draws = {k: v[:3] for k, v in schedule.epoch_augments(batches, live.train, 0).items()}
    twin.train_steps(batches, schedule.learning_rates(0, 3, live.total_steps, live.train), **draws)
    np.testing.assert_array_equal(twin.params, live.backend.params)
    assert live.steps == 3 and live.curves.step == [1, 2, 3] and all(np.isfinite(live.curves.loss))


def test_the_held_out_batch_is_scored_as_training_goes(live):
    records = [live.step() for _ in range(EVAL_EVERY)]
    assert "held_out" not in records[0] and 0 <= records[-1]["held_out"]["accuracy"] <= 1
    assert live.curves.held_out == [records[-1]["held_out"]]


def test_inspection_reads_every_edge_and_the_residual_shares(live):
    live.inspector.selected = "blocks.1.fc1"
    live.step(inspect=True)
    last = live.inspector.last
    edges = {(e["from"], e["to"]): e for e in last["edges"]}
    assert set(edges) == {(name, op.name) for op in live.ops for name in op.inputs} | {("head", "loss")}
    identity = [e for e in last["edges"] if e["identity"]]
    assert len(identity) == 3 and all(0 < e["shares"]["projection"] <= 1.5 for e in identity)
    selected = last["selected"]
    assert selected["op"] == "blocks.1.fc1" and selected["params"][0]["picture"]["shape"] == [12, 16]
    assert selected["output"]["shape"] == [16, 16] and len(selected["output"]["hist"]["counts"]) == 40


def test_the_edge_norms_are_the_norms_of_what_the_backward_passes(live):
    live.step()  # an uninspected step, then a probe of the weights it left
    last = live.probe()
    images, labels, mix = live.last_batch
    params = live.backend.params
    tape = network.forward(params, images, live.model)
    _, _, dz = network.loss_and_dlogits(tape.z, labels, live.train.loss, live.train.margin, live.train.label_smoothing, mix)
    parts = {}
    network.backward(params, tape, dz, live.model,
                     on_op=lambda op, dy, dins, dp, join: parts.update({(n, op.name): d for n, d in zip(op.inputs, dins)}))
    for edge in last["edges"]:
        d = parts.get((edge["from"], edge["to"]))
        if d is not None:
            assert edge["backward"] == pytest.approx(np.linalg.norm(d) / np.sqrt(len(labels)), rel=1e-5)


def test_identity_share_is_one_without_a_branch_and_a_half_for_equal_paths():
    assert identity_shares((4.0, 0.0, 0.0)) == {"projection": 1.0, "norm": 1.0}
    assert identity_shares((1.0, 1.0, 1.0))["projection"] == pytest.approx(0.5)


def test_a_nan_is_located_on_its_op_and_the_step_undone(live):
    live.step()
    param_views(live.backend.params, live.model)["blocks.1.fc2.weight"][0, 0] = np.inf
    before = live.backend.state()
    record = live.step()
    assert record["alarm"]["op"] == "blocks.1.fc2" and record["alarm"]["stage"] == "forward"
    assert "first value that is not finite" in record["alarm"]["message"]
    assert live.steps == 1 and live.alarm == record["alarm"]
    for key, value in live.backend.state().items():
        np.testing.assert_array_equal(value, before[key])


def test_an_update_that_overflows_is_named_and_undone(live, tmp_path):
    preset = tmp_path / "hot.toml"
    preset.write_text(live_preset_text(live, optimizer="sgd", lr_base=1e300, warmup_steps=0, clip_threshold=float("inf")))
    live.load_preset(str(preset))
    live.configure(batch_size=16)
    before = live.backend.state()["params"]
    record = live.step()
    assert record["alarm"]["stage"] == "update" and "the update made" in record["alarm"]["message"]
    np.testing.assert_array_equal(live.backend.params, before)


def live_preset_text(live, **train):
    return preset_to_toml("hot", "", live.model, dataclasses.replace(live.train, **train))


def test_locate_finds_a_gradient_that_is_not_finite(live, monkeypatch):
    live.step()
    real = network.BACKWARD["gelu"]
    monkeypatch.setitem(network.BACKWARD, "gelu", lambda *a: ([real(*a)[0][0] * np.nan], {}))
    assert nan.locate(live) == ("backward", "blocks.1.gelu")


def test_value_under_the_cursor_is_the_exact_weight(live):
    w = graph.ops_of(live.model)[1]
    assert live.value("embed", "weight", 3, 5) == float(param_views(live.params(), live.model)["embed.weight"][3, 5])
    assert live.value("embed", "bias", 0, 2) == float(param_views(live.params(), live.model)["embed.bias"][2])
    with pytest.raises(LiteNetError, match=r"outside embed.weight's shape \(192, 12\)"):
        live.value("embed", "weight", 192, 0)
    with pytest.raises(LiteNetError, match="no parameter 'gamma' in op 'embed'"):
        live.value(w.name, "gamma", 0, 0)


def test_configure_changes_the_recipe_and_keeps_the_weights(live):
    live.step()
    params = live.backend.params.copy()
    live.configure(optimizer="sgd", lr_base=0.05, augment="flip")
    np.testing.assert_array_equal(live.backend.params, params)
    assert live.train.optimizer == "sgd" and "velocity" in live.backend.state()
    with pytest.raises(LiteNetError, match="the Studio does not set seed"):
        live.configure(seed=3)
    with pytest.raises(LiteNetError, match="batch_size must be ≥ 1"):
        live.configure(batch_size=0)


def test_a_saved_preset_loads_as_the_same_network_and_recipe(live, tmp_path):
    path = live.save_preset(tmp_path, "my-net", "from the test")
    preset = load_preset(str(path))
    assert (preset.name, preset.model, preset.train) == ("my-net", live.model, live.train)
    with pytest.raises(LiteNetError, match="preset name 'a/b'"):
        live.save_preset(tmp_path, "a/b")


def test_reset_starts_over_from_the_seed(live):
    first = live.backend.params.copy()
    live.step()
    live.reset()
    np.testing.assert_array_equal(live.backend.params, first)
    assert live.steps == 0 and live.curves.step == [] and live.alarm is None


def test_describe_has_what_a_page_needs(live):
    state = live.describe()
    assert state["layers"][0]["kind"] == "patches" and state["check"]["ok"]
    assert [op["name"] for op in state["ops"]] == [op.name for op in live.ops]
    assert {op["layer"] for op in state["ops"]} == set(range(len(SMALL)))
    assert "mixer_block" in state["kinds"] and state["kinds"]["embed"]["settings"][0]["name"] == "width"


def test_augmentation_draws_follow_the_recipe(live):
    images, labels, mix, draws, indices = live._next_batch()
    assert set(draws) == {"flips", "crops"}  # litenet-mixer-cpu: crop+flip
    np.testing.assert_array_equal(images, augment.apply(live.data.train_images, indices, **draws))


def test_a_whole_tensor_comes_on_request(live):
    with pytest.raises(LiteNetError, match="no batch has run yet"):
        live.tensor("embed", "output")
    live.step()
    np.testing.assert_array_equal(live.tensor("embed", "weight"), param_views(live.params(), live.model)["embed.weight"])
    assert live.tensor("blocks.0.token_fc1", "output").shape == (6, 16, 12)  # (T', B, d), tokens-major
    with pytest.raises(LiteNetError, match="op 'pool' has no 'weight'"):
        live.tensor("pool", "weight")


@pytest.mark.gpu
def test_the_cuda_backend_trains_in_the_studio_and_numpy_re_runs_the_batch_for_the_page(data):
    cuda = LiveNetwork(data, "litenet-mixer-cpu", backend="cuda")
    numpy = LiveNetwork(data, "litenet-mixer-cpu")
    for live in (cuda, numpy):
        live.configure(batch_size=16)
    for _ in range(3):
        on_gpu, reference = cuda.step(inspect=True), numpy.step()
    assert on_gpu["loss"] == pytest.approx(reference["loss"], rel=1e-3)
    assert cuda.inspector.last["edges"] and cuda.inspector.last["nodes"]


def test_save_takes_the_list_on_the_canvas_not_only_the_one_built(live, tmp_path):
    edited = SMALL[:4] + [{"kind": "mean_tokens"}, {"kind": "head"}]
    path = live.save_preset(tmp_path, "edited", layer_dicts=edited)
    assert [lay.kind for lay in load_preset(str(path)).model.layers][-2:] == ["mean_tokens", "head"]
    assert len(live.model.layers) == len(SMALL)  # the network being trained is unchanged


def test_saving_the_built_network_names_it(live, tmp_path):
    live.save_preset(tmp_path, "named")
    assert live.name == "named"
