"""One check against the real CIFAR-10 copy, where the machine has it: the first test record converts right."""

from pathlib import Path

import numpy as np
import pytest

from litenet.data.readers import CLASS_NAMES, parse_binary_batch

TEST_BATCH = Path("/work/shared/data/cifar-10-batches-bin/test_batch.bin")


@pytest.mark.skipif(not TEST_BATCH.is_file(), reason="needs the shared CIFAR-10 copy")
def test_first_test_record_of_the_real_data():
    data = TEST_BATCH.read_bytes()
    images, labels = parse_binary_batch(data, str(TEST_BATCH))
    assert images.shape == (10000, 32, 32, 3) and labels.shape == (10000,)
    assert CLASS_NAMES[labels[0]] == "cat"  # the first CIFAR-10 test image is the well-known cat
    record = np.frombuffer(data[1:3073], np.uint8)
    for row, col in [(0, 0), (5, 20), (31, 31)]:
        expected = [record[ch * 1024 + row * 32 + col] for ch in range(3)]
        assert images[0, row, col].tolist() == expected
    assert np.bincount(labels, minlength=10).tolist() == [1000] * 10
