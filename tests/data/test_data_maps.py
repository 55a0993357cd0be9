"""The maps folder: atomic writes, reopening without reconversion, manifest checks, partial data, the CLI."""

import functools
import json

import numpy as np
import pytest

import litenet.data.conversion as convert_module
import litenet.data.dataset as dataset_module
from cifar_fakes import write_layout
from litenet.data import CLASS_NAMES, cli
from litenet.errors import LiteNetError


def test_open_converts_once_then_reopens_the_maps(bin_dir, isolated, fake, monkeypatch, open_small):
    ds = open_small(data=bin_dir)
    assert ds.converted and ds.path == isolated / "data" / "cifar10-maps"
    assert ds.classes == CLASS_NAMES and len(ds.train) == 25 and len(ds.test) == 5
    assert ds.train.images.shape == (25, 32, 32, 3) and ds.train.images.dtype == np.uint8
    monkeypatch.setattr(dataset_module, "convert", lambda *a, **k: pytest.fail("converted again"))
    again = open_small(data=bin_dir, verify=True)
    assert not again.converted
    assert isinstance(again.train.images, np.memmap)
    np.testing.assert_array_equal(again.train.images, fake.train_images())
    np.testing.assert_array_equal(again.test.labels, fake.test[1])
    with pytest.raises(ValueError, match="read-only"):
        again.train.images[0, 0, 0, 0] = 1


def test_manifest_records_shapes_classes_and_hashes(bin_dir, tmp_path, open_small):
    m = open_small(data=bin_dir, maps=tmp_path / "maps").manifest
    on_disk = json.loads((tmp_path / "maps" / "manifest.json").read_text())
    assert m == on_disk
    assert m["splits"]["train"]["images"]["shape"] == [25, 32, 32, 3]
    assert m["classes"] == list(CLASS_NAMES) and m["train_batches"] == [1, 2, 3, 4, 5] and not m["partial"]
    assert set(m["source"]["sha256"]) == {*(f"data_batch_{i}.bin" for i in range(1, 6)), "test_batch.bin",
                                          "batches.meta.txt"}


class Crash(RuntimeError):
    pass


def crash_on_second_append(monkeypatch):
    """Make the converter fail after it has written the first batch."""
    calls = []
    real = convert_module.SplitWriter.append

    def append(self, images, labels):
        calls.append(1)
        if len(calls) == 2:
            raise Crash("disk full")
        real(self, images, labels)

    monkeypatch.setattr(convert_module.SplitWriter, "append", append)


def test_failed_conversion_leaves_no_maps_folder(bin_dir, tmp_path, monkeypatch, open_small):
    crash_on_second_append(monkeypatch)
    with pytest.raises(Crash):
        open_small(data=bin_dir, maps=tmp_path / "out" / "maps")
    assert list((tmp_path / "out").iterdir()) == []  # neither maps nor a temporary folder


def test_killed_conversion_leaves_only_a_hidden_folder_that_never_looks_valid(bin_dir, tmp_path, monkeypatch,
                                                                              open_small):
    crash_on_second_append(monkeypatch)
    monkeypatch.setattr(convert_module.shutil, "rmtree", lambda *a, **k: None)  # as if killed: no clean-up
    with pytest.raises(Crash):
        open_small(data=bin_dir, maps=tmp_path / "out" / "maps")
    [leftover] = (tmp_path / "out").iterdir()
    assert leftover.name.startswith(".maps.tmp-") and not (leftover / "manifest.json").exists()
    monkeypatch.undo()
    assert open_small(data=bin_dir, maps=tmp_path / "out" / "maps").converted  # missing maps: rebuilt


def test_failed_rebuild_keeps_the_old_maps(bin_dir, py_dir, tmp_path, monkeypatch, open_small):
    old = open_small(data=bin_dir, maps=tmp_path / "maps").manifest
    crash_on_second_append(monkeypatch)
    with pytest.raises(Crash):
        open_small(data=py_dir, maps=tmp_path / "maps", force=True)
    monkeypatch.undo()
    assert open_small(maps=tmp_path / "maps", verify=True).manifest == old


def test_force_rebuilds_from_another_source(bin_dir, py_dir, tmp_path, open_small):
    open_small(data=bin_dir, maps=tmp_path / "maps")
    with pytest.raises(LiteNetError, match=r"were built from .*cifar-10-batches-bin, not .*cifar-10-batches-py; "
                                           r"run `litenet data --force"):
        open_small(data=py_dir, maps=tmp_path / "maps")
    ds = open_small(data=py_dir, maps=tmp_path / "maps", force=True)
    assert ds.converted and ds.manifest["source"]["layout"] == "python"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # old maps cleaned up


def test_truncated_map_is_caught_and_force_repairs_it(bin_dir, tmp_path, open_small):
    open_small(data=bin_dir, maps=tmp_path / "maps")
    path = tmp_path / "maps" / "test_images.u8"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(LiteNetError, match=r"stale or corrupt \(test_images.u8 is 15260 bytes, expected 15360\); "
                                           r"run `litenet data --force`"):
        open_small(maps=tmp_path / "maps")
    assert open_small(data=bin_dir, maps=tmp_path / "maps", force=True).converted


def test_verify_catches_a_changed_byte(bin_dir, tmp_path, open_small):
    open_small(data=bin_dir, maps=tmp_path / "maps")
    path = tmp_path / "maps" / "train_labels.u8"
    labels = bytearray(path.read_bytes())
    labels[3] ^= 1
    path.write_bytes(bytes(labels))
    open_small(maps=tmp_path / "maps")  # sizes still match: the quick check passes
    with pytest.raises(LiteNetError, match="train_labels.u8 does not match its sha256"):
        open_small(maps=tmp_path / "maps", verify=True)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(version=0), "version 0, this LiteNet reads"),
    (lambda m: m["splits"]["train"]["images"].update(shape=[25, 32, 32]), "train images shape"),
    (lambda m: m["splits"].pop("test"), "manifest lacks 'test'"),
])
def test_stale_manifests_are_refused(bin_dir, tmp_path, open_small, edit, message):
    open_small(data=bin_dir, maps=tmp_path / "maps")
    path = tmp_path / "maps" / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    with pytest.raises(LiteNetError, match=f"stale or corrupt .*{message}.*--force"):
        open_small(maps=tmp_path / "maps")


def test_maps_location_comes_from_litenet_maps(bin_dir, tmp_path, monkeypatch, open_small):
    monkeypatch.setenv("LITENET_MAPS", str(tmp_path / "elsewhere"))
    assert open_small(data=bin_dir).path == tmp_path / "elsewhere"


def test_a_foreign_folder_is_never_overwritten(bin_dir, tmp_path, open_small):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(LiteNetError, match="not empty and is not a LiteNet maps folder"):
        open_small(data=bin_dir, maps=tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


def test_partial_data(tmp_path, fake, open_small):
    src = write_layout(tmp_path / "gpu", fake, "binary", batches=[1], meta=False)
    with pytest.raises(LiteNetError, match="missing data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, "
                                           "data_batch_5.bin; .* --allow-partial"):
        open_small(data=src, maps=tmp_path / "maps")
    ds = open_small(data=src, maps=tmp_path / "maps", allow_partial=True)
    assert len(ds.train) == 5 and ds.manifest["train_batches"] == [1] and ds.manifest["partial"]
    np.testing.assert_array_equal(ds.train.images, fake.train_images([1]))
    with pytest.raises(LiteNetError, match=r"hold only training batches \[1\]; pass --allow-partial"):
        open_small(maps=tmp_path / "maps")


def test_test_batch_is_always_required(tmp_path, fake, open_small):
    src = write_layout(tmp_path / "gpu", fake, "binary", batches=[1, 2], test=False)
    with pytest.raises(LiteNetError, match="missing .*test_batch.bin; at least one training batch and the test"):
        open_small(data=src, maps=tmp_path / "maps", allow_partial=True)


def test_bad_batch_is_named_in_the_error(bin_dir, tmp_path, open_small):
    (bin_dir / "data_batch_4.bin").write_bytes(b"\x00" * 3072)
    with pytest.raises(LiteNetError, match=r"cifar-10-batches-bin/data_batch_4.bin: 3072 bytes is not a whole"):
        open_small(data=bin_dir, maps=tmp_path / "maps")


def test_cli_summary(bin_dir, tmp_path, monkeypatch, capsys):
    # The synthetic batches hold 5 records, not 10000.
    monkeypatch.setattr(cli, "open_cifar10", functools.partial(cli.open_cifar10, records_per_batch=None))
    args = ["--data", str(bin_dir), "--maps", str(tmp_path / "maps")]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "binary layout, folder" in out and "25 images (batches 1, 2, 3, 4, 5)" in out
    assert "convert " in out and f"maps     {tmp_path / 'maps'}" in out
    assert cli.main([*args, "--verify"]) == 0
    out = capsys.readouterr().out
    assert "not needed" in out and "every map matches its sha256" in out


def test_cli_prints_user_errors_as_one_line(tmp_path, capsys):
    assert cli.main(["--data", str(tmp_path / "nowhere"), "--maps", str(tmp_path / "maps")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("litenet data: error: --data=") and err.count("\n") == 1
