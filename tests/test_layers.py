"""The layer-list format (litenet.layers, graph.layer_ops): the two families as layer lists (the same ops,
losses and ONNX bit for bit), a mixed network end to end, and lists that cannot be built (one line
naming the layer and the shapes)."""

import dataclasses

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from cli_runs import REPO, fake_maps, litenet
from litenet import graph, layers
from litenet.export import onnx_graph
from litenet.export.onnx_fp32 import build_fp32
from litenet.forward import logits
from litenet.layers import LayerError, layer
from litenet.model import (LayersConfig, MixerConfig, ModelConfig, TrainConfig, configs_from_json, configs_to_json,
                           init_params, load_preset, model_from_dict, model_to_dict, param_count, param_views)
from litenet.train import gradcheck
from litenet.train.numpy_backend import NumpyBackend

FAMILY_MODELS = [load_preset("litenet-base").model, load_preset("litenet-seed").model,
                 dataclasses.replace(load_preset("litenet-mixer-cpu").model, blocks=2),
                 ModelConfig(embed="full", input_shift=0.5, width=8, hidden=12, blocks=3, classes=4),
                 MixerConfig(patch=8, width=6, token_hidden=5, channel_hidden=7, blocks=2, classes=3)]

# patches → embedding → 2 Mixer blocks → LayerNorm → mean → an MLP block on the pooled vector → head
MIXED = (layer("patches", patch=8, input_shift=0.47, input_scale=4.0), layer("embed", width=16),
         layer("mixer_block", token_hidden=8, channel_hidden=32), layer("mixer_block", token_hidden=8, channel_hidden=32),
         layer("layernorm"), layer("mean_tokens"), layer("mlp_block", hidden=24), layer("head"))


def as_layers(model) -> LayersConfig:
    """The same network as a layers-family config."""
    return LayersConfig(layers=graph.layers_of(model), classes=model.classes, ln_eps=model.ln_eps)


def op_fields(ops):
    return [(op.kind, op.name, op.inputs, op.shape, op.params, op.attrs) for op in ops]


@pytest.mark.parametrize("model", FAMILY_MODELS, ids=lambda m: f"{m.family}-{m.width}x{m.blocks}")
def test_a_family_as_a_layer_list_has_the_same_ops(model):
    assert op_fields(graph.ops_of(as_layers(model))) == op_fields(graph.ops_of(model))


def test_the_families_keep_their_op_names():
    mlp = [op.name for op in graph.ops_of(ModelConfig(blocks=1))]
    assert mlp == ["embed.rows", "embed", "blocks.0.fc1", "blocks.0.gelu", "blocks.0.fc2", "blocks.0.residual",
                   "blocks.0.ln", "head"]
    mixer = [op.name for op in graph.ops_of(MixerConfig(blocks=1))]
    assert mixer[:3] == ["patches", "embed", "blocks.0.token_ln"] and mixer[-3:] == ["final_ln", "pool", "head"]


@pytest.mark.parametrize("name", ["litenet-base", "litenet-mixer-cpu"])
def test_a_family_and_its_layer_list_train_and_export_bit_for_bit(name):
    preset = load_preset(name)
    model = dataclasses.replace(preset.model, blocks=1)
    train = dataclasses.replace(preset.train, batch_size=8)
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 8)
    results = []
    for m in (model, as_layers(model)):
        backend = NumpyBackend(m, train, init_params(m, 0))
        losses = [backend.step(images, labels, 1e-2)["loss"] for _ in range(3)]
        onnx_bytes = build_fp32(backend.params, m, {}).graph.SerializeToString()
        results.append((losses, backend.params.tobytes(), onnx_bytes))
    assert results[0] == results[1]


def test_a_layer_list_round_trips_through_config_json():
    model = LayersConfig(layers=MIXED, classes=10)
    again, _, _ = configs_from_json(configs_to_json(model, TrainConfig(), "mixed"))
    assert again == model and hash(again) == hash(model)
    assert model_from_dict(model_to_dict(model)) == model


def test_a_mixed_network_has_exact_gradients_and_its_onnx_agrees():
    model = LayersConfig(layers=MIXED, classes=10)
    names = [op.name for op in graph.ops_of(model)]
    assert names[-8:] == ["layernorm.0", "pool", "blocks.2.fc1", "blocks.2.gelu", "blocks.2.fc2", "blocks.2.residual",
                          "blocks.2.ln", "head"]
    assert graph.ops_of(model)[-2].shape == (16,)  # the MLP block runs on the pooled vector
    assert max(r.rel_error for r in gradcheck.check_model(model, 0.3, samples=8)) < gradcheck.TOLERANCE
    params = init_params(model, 0)
    proto = build_fp32(params, model, {})
    onnx_graph.check(proto)
    images = np.random.default_rng(1).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    z_onnx = session.run(None, {"images": images.astype(np.float32) / 255})[0]
    z_numpy = logits(graph.ops_of(model), param_views(params, model), images)
    np.testing.assert_allclose(z_onnx, z_numpy, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("items, message", [
    ([], "the layer list is empty; start with pixels or patches and end with head"),
    ([{"kind": "embed", "width": 8}, {"kind": "head"}],
     "layer 1 (embed): the first layer must read the images (one of pixels, patches)"),
    ([{"kind": "pixels"}, {"kind": "patches"}, {"kind": "head"}],
     "layer 2 (patches): reads the images, so it can only be the first layer; it gets a vector (3072,)"),
    ([{"kind": "pixels"}, {"kind": "embed", "width": 8}, {"kind": "mixer_block", "token_hidden": 4,
                                                          "channel_hidden": 4}, {"kind": "head"}],
     "layer 3 (mixer_block): needs patch tokens (T, d) but gets a vector (8,); put it before mean_tokens"),
    ([{"kind": "patches", "patch": 8}, {"kind": "embed", "width": 32}, {"kind": "head"}],
     "layer 3 (head): needs a vector (d,) but gets patch tokens (16, 32); add mean_tokens before it"),
    ([{"kind": "pixels"}, {"kind": "embed", "width": 8}, {"kind": "mean_tokens"}, {"kind": "head"}],
     "layer 3 (mean_tokens): needs patch tokens (T, d) but gets a vector (8,); put it before mean_tokens"),
    ([{"kind": "pixels"}, {"kind": "embed", "width": 8}],
     "layer 2 (embed): the list ends with a vector (8,); end it with head (10 classes)"),
    ([{"kind": "pixels"}, {"kind": "head"}, {"kind": "gelu"}],
     "layer 3 (gelu): comes after the head, which gives the logits and must be the last layer"),
    ([{"kind": "pixels"}, {"kind": "conv", "width": 8}, {"kind": "head"}],
     "layer 2: unknown kind 'conv'; choose one of " + ", ".join(layers.KINDS)),
    ([{"kind": "pixels"}, {"kind": "mlp_block", "hiden": 8}, {"kind": "head"}],
     "layer 2 (mlp_block): unknown setting hiden; it takes hidden"),
    ([{"kind": "pixels"}, {"kind": "mlp_block"}, {"kind": "head"}],
     "layer 2 (mlp_block): needs hidden (fc1's output width)"),
    ([{"kind": "pixels"}, {"kind": "embed", "width": 0}, {"kind": "head"}],
     "layer 2 (embed): width must be in [1, 65536]; got 0"),
    ([{"kind": "patches", "patch": 5}, {"kind": "head"}], "layer 1 (patches): patch must be one of 1, 2, 4, 8, 16, 32; got 5"),
    ([{"kind": "pixels"}, {"kind": "linear", "width": "8"}, {"kind": "head"}],
     "layer 2 (linear): width must be int, got '8'"),
    ([{"kind": "pixels"}, {"kind": "linear", "width": 8, "name": "head"}, {"kind": "head"}],
     "layer 3 (head): the name 'head' is already used by layer 2 (linear); give the layer another name"),
    ([{"kind": "pixels", "name": "images"}, {"kind": "head"}],
     "layer 1 (pixels): the name 'images' is already used by the images; give the layer another name"),
    ([{"kind": "pixels", "name": "a b"}, {"kind": "head"}],
     "layer 1 (pixels): name 'a b' must be letters, digits and _ in dot-separated parts"),
])
def test_a_list_that_cannot_be_built_is_refused_in_one_line(items, message):
    with pytest.raises(LayerError) as caught:
        model_from_dict({"family": "layers", "layers": items}, source="p.toml")
    assert str(caught.value) == f"p.toml: {message}"
    assert "\n" not in str(caught.value)


def test_check_reports_every_fault_on_its_layer():
    listed = layers.from_dicts([{"kind": "pixels"}, {"kind": "mixer_block", "token_hidden": 4, "channel_hidden": 4},
                                {"kind": "gelu"}, {"kind": "head"}])
    checked = layers.check(listed, 10)
    assert [bool(c.problem) for c in checked] == [False, True, False, False]
    assert checked[0].shape == (3072,) and checked[2].shape is None  # not judged after a fault


def test_a_bad_preset_is_one_line_from_the_cli(tmp_path):
    preset = tmp_path / "bad.toml"
    preset.write_text('[model]\nfamily = "layers"\n[[model.layers]]\nkind = "pixels"\n'
                      '[[model.layers]]\nkind = "mixer_block"\ntoken_hidden = 4\nchannel_hidden = 4\n'
                      '[[model.layers]]\nkind = "head"\n')
    r = litenet("train", "--preset", str(preset), "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == (f"litenet train: error: {preset}: layer 2 (mixer_block): needs patch tokens (T, d) but gets "
                        "a vector (3072,); put it before mean_tokens\n")


def test_a_flag_of_another_family_is_refused_for_a_layer_list(tmp_path):
    preset = tmp_path / "net.toml"
    preset.write_text('[model]\nfamily = "layers"\n[[model.layers]]\nkind = "pixels"\n[[model.layers]]\nkind = "head"\n')
    r = litenet("train", "--preset", str(preset), "--width", "8", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and r.stderr.startswith("litenet train: error: --width is not a setting of the layers family")


def test_a_layer_list_trains_on_the_cuda_lowering_as_with_numpy():
    """The CUDA backend walks any op list (litenet/lowering): a layer list trains there (on the CPU
    emulator here) with the NumPy backend's losses."""
    import shutil
    import sys
    from pathlib import Path

    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "cuda"))
    from emulator.device import EmuDevice

    from litenet.model import init_params
    from litenet.train.gpu_backend import GpuBackend
    from litenet.train.numpy_backend import NumpyBackend
    from litenet.train import schedule
    from tests.golden.record import learnable_images

    model, train = LayersConfig(layers=MIXED), TrainConfig(batch_size=8, optimizer="adamw", loss="cross-entropy",
                                                           lr_base=2e-3)
    images, labels = learnable_images(32, 10, 0)
    batches = schedule.epoch_batches(32, train, 0)[:3]
    losses = []
    for backend in (GpuBackend(model, train, init_params(model, 0), device=EmuDevice()),
                    NumpyBackend(model, train, init_params(model, 0), dtype=np.float64)):
        backend.load_dataset(images, labels.astype(np.int64))
        backend.train_steps(batches, np.full(3, 1e-3))
        losses.append(backend.fetch_stats()["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


def test_a_mixed_preset_trains_exports_and_runs_in_litenet_infer(tmp_path):
    maps = fake_maps(tmp_path / "cifar")
    preset = tmp_path / "mixed.toml"
    tables = "".join("[[model.layers]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in item.items())
                     for item in layers.to_dicts(MIXED))
    preset.write_text('name = "mixed"\n[model]\nfamily = "layers"\n' + tables +
                      '[train]\nepochs = 1\nbatch_size = 32\noptimizer = "adamw"\nlr_base = 2e-3\n'
                      'loss = "cross-entropy"\n')
    out = tmp_path / "run"
    r = litenet("train", "--preset", str(preset), "--maps", str(maps), "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    r = litenet("export", "--weights", str(out), "--int8", "--calib", "64", "--maps", str(maps))
    assert r.returncode == 0, r.stderr
    assert "fp32 ONNX vs NumPy forward" in r.stdout
    image = tmp_path / "x.png"
    Image.fromarray(np.full((32, 32, 3), 90, np.uint8)).save(image)
    for precision in ("fp32", "int8"):
        r = _infer(out, image, precision)
        assert r.returncode == 0, r.stderr
        assert f"onnxruntime {precision}" in r.stdout


def _infer(model, image, precision):
    """`litenet-infer IMAGE --model MODEL` from this checkout."""
    return subprocess.run([sys.executable, "-m", "litenet.runtime", str(image), "--model", str(model),
                           "--precision", precision, "--backend", "auto"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def _toml(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else f'"{value}"' if isinstance(value, str) \
        else repr(value)


def test_param_count_of_a_layer_list_matches_its_ops():
    model = LayersConfig(layers=MIXED)
    assert param_count(model) == sum(int(np.prod(p.shape)) for op in graph.ops_of(model) for p in op.params)
