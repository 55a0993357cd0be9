"""The model description: presets, overrides, parameter layout and the seeded initialisation."""

import numpy as np
import pytest

from litenet.errors import LiteNetError
from litenet.model import (ModelConfig, TrainConfig, config_from_dict, configs_from_json, configs_to_json,
                           init_params, load_preset, override, param_count, param_layout, param_views,
                           preset_names)


def test_seed_preset_is_the_spec():
    p = load_preset("litenet-seed")
    assert p.model == ModelConfig(embed="channel-sum", width=64, hidden=256, blocks=1)
    t = p.train
    assert (t.batch_size, t.lr_base, t.momentum, t.weight_decay, t.warmup_steps) == (64, 0.048, 0.9, 1e-4, 100)
    assert (t.clip_threshold, t.clip_norm, t.loss, t.margin, t.schedule) == (10.0, 1.0, "margin", 0.3, "constant")
    assert t.lr == pytest.approx(0.012)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads(name):
    p = load_preset(name)
    assert param_count(p.model) > 0 and p.name == name


def test_layout_is_contiguous_and_named():
    model = ModelConfig(blocks=2)
    specs = param_layout(model)
    assert specs[0].name == "embed.weight" and specs[0].shape == (1024, 64)
    assert [s.offset for s in specs[1:]] == [a.offset + a.size for a in specs[:-1]]
    assert param_count(model) == sum(s.size for s in specs)
    assert {s.name for s in specs} >= {"blocks.1.ln.gamma", "head.bias"}


def test_full_embedding_has_3072_rows():
    assert param_layout(ModelConfig(embed="full"))[0].shape == (3072, 64)


def test_init_is_seeded_and_within_kaiming_bounds():
    model = ModelConfig()
    a, b, c = init_params(model, 1), init_params(model, 1), init_params(model, 2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    views = param_views(a, model)
    for p in param_layout(model):
        v = views[p.name]
        if p.kind == "gamma":
            assert np.all(v == 1)
        elif p.kind == "beta":
            assert np.all(v == 0)
        else:  # U(±1/√fan_in), and it should nearly reach its bound
            bound = 1 / np.sqrt(p.fan_in)
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.9 * bound


def test_float64_init_equals_float32_init_rounded():
    model = ModelConfig()
    assert np.array_equal(init_params(model, 0, np.float64).astype(np.float32), init_params(model, 0))


def test_normal_embedding_init_for_the_seed_experiment():
    w = param_views(init_params(ModelConfig(embed_init="normal"), 0), ModelConfig())["embed.weight"]
    assert 0.95 < w.std() < 1.05


def test_overrides_are_checked():
    t = override(TrainConfig(), {"lr_base": "0.1", "epochs": 3, "hidden": 9})  # hidden is not a train field
    assert t.lr_base == 0.1 and t.epochs == 3
    with pytest.raises(LiteNetError, match="must be int"):
        override(TrainConfig(), {"epochs": "many"})
    with pytest.raises(LiteNetError, match="unknown"):
        config_from_dict(ModelConfig, {"widht": 3})
    with pytest.raises(LiteNetError, match="loss must be one of"):
        TrainConfig(loss="hinge")


def test_config_json_round_trip():
    model, train = ModelConfig(width=32), TrainConfig(loss="cross-entropy")
    m2, t2, doc = configs_from_json(configs_to_json(model, train, "x", test_accuracy=0.5))
    assert (m2, t2, doc["preset"], doc["test_accuracy"]) == (model, train, "x", 0.5)
    with pytest.raises(LiteNetError, match="not valid JSON"):
        configs_from_json("{")


def test_unknown_preset_names_the_choices():
    with pytest.raises(LiteNetError, match="litenet-seed"):
        load_preset("no-such-preset")


def test_a_preset_with_a_base_changes_only_what_it_lists(tmp_path):
    (tmp_path / "parent.toml").write_text('name = "parent"\n[model]\nfamily = "mixer"\nwidth = 16\n'
                                          '[train]\nepochs = 3\nbatch_size = 32\n', encoding="utf-8")
    (tmp_path / "child.toml").write_text(f'base = "{tmp_path / "parent.toml"}"\n[train]\nepochs = 7\n',
                                         encoding="utf-8")
    child = load_preset(str(tmp_path / "child.toml"))
    assert child.name == "child" and child.model.family == "mixer" and child.model.width == 16
    assert (child.train.epochs, child.train.batch_size) == (7, 32)


def test_a_loop_of_base_presets_is_refused_in_one_line(tmp_path):
    for me, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"{me}.toml").write_text(f'base = "{tmp_path / (other + ".toml")}"\n', encoding="utf-8")
    with pytest.raises(LiteNetError, match="base presets form a loop"):
        load_preset(str(tmp_path / "a.toml"))
