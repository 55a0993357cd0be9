"""Sizes and shapes a config.json, a preset TOML or a flag can ask for: refused in one line before allocation."""

from __future__ import annotations

import json

import pytest

from litenet.cli import main
from litenet.errors import EXIT_INPUT, EXIT_USAGE, LiteNetError, UsageError
from litenet.model import ModelConfig, MixerConfig, TrainConfig, configs_from_json, configs_to_json, load_preset


@pytest.mark.parametrize("cls,field,value", [
    (ModelConfig, "blocks", 1_000_000_000), (ModelConfig, "width", 10**12), (ModelConfig, "hidden", 10**9),
    (ModelConfig, "classes", 10**9), (MixerConfig, "blocks", 10**9), (MixerConfig, "channel_hidden", 10**9),
])
def test_a_huge_size_is_refused_naming_it(cls, field, value):
    with pytest.raises(UsageError, match=field):
        cls(**{field: value})


def test_sizes_each_in_range_but_too_many_parameters_together_are_refused():
    with pytest.raises(UsageError, match="parameters"):
        ModelConfig(width=60_000, hidden=60_000, blocks=100)


def test_huge_blocks_on_the_command_line_exits_2_in_one_line(tmp_path, capsys):
    code = main(["train", "--preset", "litenet-seed", "--blocks", "1000000000", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1 and "blocks must be" in err and "256" in err


def config_text(**model) -> str:
    return configs_to_json(ModelConfig(), TrainConfig(), "test").replace('"blocks": 1', json.dumps(model)[1:-1], 1)


def test_huge_blocks_in_a_config_json_is_a_bad_file(tmp_path):
    with pytest.raises(LiteNetError, match="config.json: blocks must be") as caught:
        configs_from_json(config_text(blocks=10**9))
    assert caught.value.exit_status == EXIT_INPUT


@pytest.mark.parametrize("model", ["[1, 2]", '"mlp"', "3"])
def test_a_model_that_is_not_an_object_is_refused(model):
    doc = json.loads(configs_to_json(ModelConfig(), TrainConfig(), "test"))
    text = json.dumps(doc).replace(json.dumps(doc["model"]), model)
    with pytest.raises(LiteNetError, match='"model" must be an object'):
        configs_from_json(text)


def test_deeply_nested_json_is_refused_without_recursion_error():
    with pytest.raises(LiteNetError, match="nested too deeply"):
        configs_from_json("[" * 100_000 + "]" * 100_000)


def test_a_misspelt_preset_table_is_refused_naming_it(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('base = "litenet-seed"\n[trian]\nepochs = 1\n')
    with pytest.raises(LiteNetError, match="'trian'"):
        load_preset(str(path))


def test_an_unknown_top_level_preset_key_is_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('name = "x"\nepochs = 3\n[model]\nwidth = 8\n')
    with pytest.raises(LiteNetError, match="'epochs'"):
        load_preset(str(path))


def test_every_shipped_preset_still_loads():
    from litenet.model import preset_names

    assert all(load_preset(name).name for name in preset_names())
