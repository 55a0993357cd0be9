"""`litenet train --help`: every setting flag says what it does and what it takes, from litenet/settings.py."""

import dataclasses

from cli_runs import litenet
from litenet.model import FAMILIES, TrainConfig
from litenet.settings import SETTINGS


def test_every_setting_has_a_meaning_and_valid_values():
    names = {f.name for cls in (*FAMILIES.values(), TrainConfig) for f in dataclasses.fields(cls)} - {"layers"}
    assert names == set(SETTINGS)
    for name, (meaning, valid) in SETTINGS.items():
        assert meaning and valid, name


def test_help_shows_the_table_not_field_names():
    r = litenet("train", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "Config." not in text
    assert "--lr-base FLOAT peak learning rate" in text and "--precision STR CUDA backend" in text
