"""The two layout readers: pixel order, agreement between layouts, and refusal of bad or hostile files."""

import os
import pickle

import numpy as np
import pytest

from cifar_fakes import RECORDS, binary_bytes, py2_pickle, python_bytes, to_planar
from litenet.data.readers import parse_binary_batch, parse_meta, parse_python_batch, planar_to_nhwc
from litenet.errors import LiteNetError


def test_planar_record_becomes_nhwc_pixels():
    planes = np.zeros((3, 32, 32), np.uint8)
    planes[0, 2, 5], planes[1, 2, 5], planes[2, 2, 5] = 11, 22, 33  # one pixel: row 2, column 5
    planes[2, 31, 0] = 250  # blue, bottom-left corner
    record = bytes([7]) + planes.tobytes()
    images, labels = parse_binary_batch(record, "one.bin", records=1)
    assert images.shape == (1, 32, 32, 3) and images.dtype == np.uint8 and labels.tolist() == [7]
    assert images[0, 2, 5].tolist() == [11, 22, 33]
    assert images[0, 31, 0].tolist() == [0, 0, 250]
    assert images[0, 5, 2].tolist() == [0, 0, 0]  # transposed row/column would land here
    assert int(images.sum()) == 11 + 22 + 33 + 250


def test_planar_to_nhwc_matches_the_published_formula():
    rows = np.random.default_rng(1).integers(0, 256, (2, 3072), dtype=np.uint8)
    images = planar_to_nhwc(rows)
    for r, c, ch in [(0, 0, 0), (3, 17, 1), (31, 31, 2), (10, 4, 2)]:
        assert images[1, r, c, ch] == rows[1, ch * 1024 + r * 32 + c]


@pytest.mark.filterwarnings("error")  # numpy 2 warns when numpy.core is imported; we must not import it
@pytest.mark.parametrize("module", ["numpy.core.multiarray", "numpy._core.multiarray"])
def test_both_layouts_read_the_same_arrays(fake, module):
    images, labels = fake.test
    from_bin = parse_binary_batch(binary_bytes(images, labels), "test_batch.bin", RECORDS)
    from_py = parse_python_batch(python_bytes(images, labels, module), "test_batch", RECORDS)
    for got in (from_bin, from_py):
        np.testing.assert_array_equal(got[0], images)
        np.testing.assert_array_equal(got[1], labels)
        assert got[1].dtype == np.uint8


class Evil:
    """A pickle payload that would create a file if its reduce function ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("protocol", [2, 4])
def test_restricted_unpickler_refuses_code_without_running_it(tmp_path, protocol):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"data": Evil(marker), "labels": [0]}, protocol=protocol)
    with pytest.raises(LiteNetError, match=r"evil_batch: not a CIFAR-10 pickle \(refused global (posix|os)\.system"):
        parse_python_batch(data, "evil_batch")
    assert not marker.exists()


def test_restricted_unpickler_refuses_other_numpy_functions():
    data = pickle.dumps({"data": np.load, "labels": []}, protocol=2)
    with pytest.raises(LiteNetError, match="refused global numpy"):
        parse_python_batch(data, "data_batch_1")


def test_binary_rejects_partial_records():
    data = binary_bytes(*make_batch(3))[:-1]
    with pytest.raises(LiteNetError, match=r"data_batch_2.bin: 9218 bytes is not a whole number of 3073-byte"):
        parse_binary_batch(data, "data_batch_2.bin", records=None)


def test_binary_rejects_wrong_record_count():
    with pytest.raises(LiteNetError, match="data_batch_1.bin: holds 3 records, expected 10000"):
        parse_binary_batch(binary_bytes(*make_batch(3)), "data_batch_1.bin")
    with pytest.raises(LiteNetError, match="holds no records"):
        parse_binary_batch(b"", "empty.bin", records=None)


def make_batch(n, label=1):
    return np.zeros((n, 32, 32, 3), np.uint8), np.full(n, label, np.uint8)


@pytest.mark.parametrize("encode, name", [(binary_bytes, "test_batch.bin"), (python_bytes, "test_batch")])
def test_labels_above_nine_are_rejected(encode, name):
    images, labels = make_batch(3)
    labels[2] = 10
    with pytest.raises(LiteNetError, match=f"{name}: record 2 has label 10, labels must be 0-9"):
        (parse_binary_batch if name.endswith(".bin") else parse_python_batch)(encode(images, labels), name, 3)


def test_truncated_pickle_is_rejected():
    data = python_bytes(*make_batch(3))
    with pytest.raises(LiteNetError, match="data_batch_3: truncated or corrupt pickle"):
        parse_python_batch(data[: len(data) // 2], "data_batch_3", None)


@pytest.mark.parametrize("batch, message", [
    ({"data": np.zeros((3, 3000), np.uint8), "labels": [0, 0, 0]}, r"data is \(3, 3000\) uint8, expected \(N, 3072\)"),
    ({"data": np.zeros((3, 3072), np.float32), "labels": [0, 0, 0]}, "expected .* uint8"),
    ({"data": np.zeros((3, 3072), np.uint8), "labels": [0, 0]}, "3 images but 2 labels"),
    ({"labels": [0]}, "no data/labels entries"),
    ([1, 2, 3], "no data/labels entries"),
])
def test_malformed_pickles_are_rejected(batch, message):
    with pytest.raises(LiteNetError, match=message):
        parse_python_batch(py2_pickle(batch), "data_batch_4", None)


def test_python_reader_checks_record_count():
    with pytest.raises(LiteNetError, match="data_batch_5: holds 3 records, expected 10000"):
        parse_python_batch(python_bytes(*make_batch(3)), "data_batch_5")


def test_meta_files_must_name_cifar10_classes():
    with pytest.raises(LiteNetError, match="batches.meta.txt: class names .* are not CIFAR-10's"):
        parse_meta("binary", b"apple\naquarium_fish\n", "batches.meta.txt")
    names = parse_meta("python", py2_pickle({"label_names": ["airplane", "automobile", "bird", "cat", "deer",
                                                             "dog", "frog", "horse", "ship", "truck"]}), "m")
    assert names[3] == "cat"


def test_planar_helper_round_trips():
    images = make_batch(2)[0] + np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3)
    np.testing.assert_array_equal(planar_to_nhwc(to_planar(images)), images)
