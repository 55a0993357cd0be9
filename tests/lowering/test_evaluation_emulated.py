"""Evaluation over a split kept on the device (litenet/lowering/evaluation.py) on the CPU emulator: the same
logits, bit for bit, as the forward program run a batch at a time with the images uploaded and the logits
read back around each batch (how GpuBackend.logits ran before), with one upload of the images and one
download of the logits a split, whatever the split's size and the size of the split before it."""

import numpy as np
import pytest
from networks import ADAMW, BASE_LIKE, MIXER, SGD
from training import data

from litenet.graph import ops_of
from litenet.model import init_params
from litenet.train.gpu_backend import GpuBackend


def batch_by_batch(gpu: GpuBackend, images: np.ndarray) -> np.ndarray:
    """The forward program alone, a batch at a time: upload, launch, download (no take, put or advance)."""
    from litenet.lowering.arena import bind

    program = gpu.eval_program
    forward = [bind(c, gpu.v) for r in program.regions if r.phase not in ("input", "output") or r.ops
               for c in r.calls]
    last = ops_of(gpu.model)[-1].name
    out = np.empty((len(images), ops_of(gpu.model)[-1].shape[-1]), np.float32)
    chunk = np.zeros((gpu.batch, 32, 32, 3), np.uint8)
    for start in range(0, len(images), gpu.batch):
        part = images[start:start + gpu.batch]
        chunk[:] = 0
        chunk[:len(part)] = part
        gpu.dev.upload(gpu.v["eval/images"], chunk)
        for launch in forward:
            gpu.dev.launch(launch)
        out[start:start + len(part)] = gpu.dev.download(gpu.v[program.outputs.get(last, "eval/" + last)])[:len(part)]
    return out


class Counting:
    """Wraps a device: counts uploads, downloads and graph replays."""

    def __init__(self, emu):
        class Device(emu):
            uploads = downloads = replays = 0

            def upload(self, view, host):
                type(self).uploads += 1
                super().upload(view, host)

            def download(self, view):
                type(self).downloads += 1
                return super().download(view)

            def replay(self, graph):
                type(self).replays += 1
                super().replay(graph)

        self.device = Device()


@pytest.mark.parametrize("model, train", [(BASE_LIKE, SGD), (MIXER, ADAMW)], ids=["mlp", "mixer"])
@pytest.mark.parametrize("graph", [True, False], ids=["graph", "eager"])
def test_a_split_gives_the_batch_by_batch_logits_with_one_upload_and_one_download(emu, model, train, graph):
    dev = Counting(emu).device
    gpu = GpuBackend(model, train, init_params(model, 3), device=dev, graph=graph, steps_per_graph=4)
    B = gpu.batch
    # 4 whole graphs' worth and a partial batch; then a smaller split (the larger one's tail must not show);
    # then a larger one (the buffers grow and the graphs are captured again); then one image.
    for n, seed in [(4 * 2 * B + B + 3, 1), (B - 1, 2), (4 * 3 * B + 1, 3), (1, 4)]:
        images = data(n, model.classes, seed=seed)[0]
        kind = type(dev)
        before = (kind.uploads, kind.downloads, kind.replays)
        got = gpu.logits(images)
        uploads, downloads, replays = (kind.uploads - before[0], kind.downloads - before[1], kind.replays - before[2])
        assert (uploads, downloads) == (2, 1)  # the images and the counter; the logits
        batches = -(-n // B)
        assert replays == (batches // 4 + batches % 4 if graph else 0)
        np.testing.assert_array_equal(got, batch_by_batch(gpu, images))
    assert gpu.memory_report()["evaluation_split_bytes"] == (4 * 3 * B + B) * (3072 + 4 * model.classes)


def test_an_empty_split_has_no_logits(emu):
    gpu = GpuBackend(BASE_LIKE, SGD, init_params(BASE_LIKE, 0), device=emu())
    assert gpu.logits(np.zeros((0, 32, 32, 3), np.uint8)).shape == (0, BASE_LIKE.classes)


def test_the_launch_list_shows_the_split_around_the_forward_pass(emu):
    gpu = GpuBackend(MIXER, ADAMW, init_params(MIXER, 0), device=emu())
    kernels = [c.kernel for c in gpu.eval_program.calls()]
    assert kernels[0] == "split_batch_take" and kernels[-2:] == ["split_logits_put", "step_advance_reference"]
    assert "eval/split.ctr" in gpu.arena.offsets  # state: zeroed once, set with each split's upload
