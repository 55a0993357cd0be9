"""The trainer as ranks of one run (threads joined by SharedMemoryComm): the same weights on every
rank after every chunk, the weights and losses of a one-rank run, files from rank 0 alone, resume."""

import dataclasses

import numpy as np
import pytest
from parallel_fixtures import SpyBackend, run_ranks, split, stats_agree, weights_agree

from litenet.model import ModelConfig, TrainConfig
from litenet.train.backends import BACKENDS
from litenet.train.checkpoint import read_metrics
from litenet.train.parallel.comm import ReplicaMismatch, SingleRank
from litenet.train.trainer import LoopOptions, TrainData, Trainer
from litenet.weights import load_model

MODEL = ModelConfig(embed="full", input_shift=0.5, width=16, hidden=24, blocks=2)
TRAIN = TrainConfig(epochs=3, batch_size=16, lr_base=0.2, warmup_steps=5, schedule="cosine", loss="cross-entropy",
                    augment="flip")
CLASSES = tuple(f"c{i}" for i in range(10))
DATA = TrainData(split(160, 0), split(64, 1), CLASSES)  # 10 steps per epoch


def trainer(out, comm=None, **kw):
    kw.setdefault("chunk_steps", 4)
    return Trainer("tiny", MODEL, TRAIN, out, DATA, LoopOptions(progress=False, **kw), comm=comm)


def step_losses(folder):
    return np.array([r["loss"] for r in read_metrics(folder / "metrics.jsonl") if r["type"] == "step"])


@pytest.fixture(autouse=True)
def spy_backends(monkeypatch):
    monkeypatch.setitem(BACKENDS, "spy", "parallel_fixtures:SpyBackend")
    monkeypatch.setitem(BACKENDS, "drift", "parallel_fixtures:DriftingBackend")
    SpyBackend.runs.clear()


def test_two_ranks_hold_one_set_of_weights_and_match_one_rank(tmp_path):
    trainer(tmp_path / "one").run()
    results = run_ranks(2, lambda comm: trainer(tmp_path / "two", comm, backend="spy").run())
    assert [r.stopped for r in results] == ["finished", "finished"]
    runs = SpyBackend.runs
    assert len(runs[0]) == len(runs[1]) == 9  # 3 chunks (4 + 4 + 2 steps) per epoch
    for w0, w1 in zip(runs[0], runs[1]):
        assert np.array_equal(w0, w1)
    want, got = load_model(tmp_path / "one")[0], load_model(tmp_path / "two")[0]
    assert np.array_equal(got, runs[0][-1])
    weights = weights_agree(got, want, 30, MODEL, TRAIN)
    assert weights["ok"], weights
    losses = stats_agree(step_losses(tmp_path / "two"), step_losses(tmp_path / "one"), 30, MODEL, TRAIN)
    assert losses["ok"], losses
    assert results[0].test_accuracy is not None and results[1].test_accuracy is None  # rank 0 evaluates


def test_one_rank_is_the_plain_trainer(tmp_path):
    """SingleRank, and a world of one through shared memory: the same bits as no communicator."""
    trainer(tmp_path / "plain").run()
    trainer(tmp_path / "single", SingleRank()).run()
    run_ranks(1, lambda comm: trainer(tmp_path / "shared", comm).run())
    want = load_model(tmp_path / "plain")[0]
    for name in ("single", "shared"):
        assert np.array_equal(load_model(tmp_path / name)[0], want)
        assert np.array_equal(step_losses(tmp_path / name), step_losses(tmp_path / "plain"))


def test_only_rank_0_writes(tmp_path):
    folders = [tmp_path / "rank0", tmp_path / "rank1"]
    run_ranks(2, lambda comm: trainer(folders[comm.rank], comm).run())
    assert {"weights.safetensors", "config.json", "metrics.jsonl", "checkpoint.safetensors", "curves.png"} <= {
        p.name for p in folders[0].iterdir()}
    assert not folders[1].exists()
    run = read_metrics(folders[0] / "metrics.jsonl")[0]
    assert run["type"] == "run" and run["world_size"] == 2


def test_a_drifting_rank_is_caught(tmp_path):
    with pytest.raises(ReplicaMismatch, match=r"rank\(s\) \[1\]"):
        run_ranks(2, lambda comm: trainer(tmp_path, comm, backend="drift").run())


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A two-rank run from start to end, to resume against."""
    out = tmp_path_factory.mktemp("whole")
    run_ranks(2, lambda comm: trainer(out, comm).run())
    return out


@pytest.mark.parametrize("stop_at", [7, 10])  # mid-epoch, at an epoch's end
def test_resume_of_a_two_rank_run(tmp_path, whole, stop_at):
    first = run_ranks(2, lambda comm: trainer(tmp_path, comm, stop_after_steps=stop_at).run())
    assert [r.stopped for r in first] == ["interrupted"] * 2
    assert all(r.position.global_step == stop_at for r in first)
    run_ranks(2, lambda comm: trainer(tmp_path, comm, resume=True).run())  # both read the checkpoint
    assert np.array_equal(load_model(tmp_path)[0], load_model(whole)[0])
    assert np.array_equal(step_losses(tmp_path), step_losses(whole))


def test_a_two_rank_checkpoint_resumes_on_one_rank(tmp_path, whole):
    """The checkpoint holds the global state, so the number of ranks may change on resume."""
    run_ranks(2, lambda comm: trainer(tmp_path, comm, stop_after_steps=13).run())
    trainer(tmp_path, resume=True).run()
    weights = weights_agree(load_model(tmp_path)[0], load_model(whole)[0], 30, MODEL, TRAIN)
    assert weights["ok"], weights


def test_a_batch_that_does_not_split_is_one_line(tmp_path):
    from litenet.errors import LiteNetError
    with pytest.raises(LiteNetError, match="batch_size 16 does not split evenly over 3 ranks") as e:
        run_ranks(3, lambda comm: trainer(tmp_path, comm))
    assert "\n" not in str(e.value)
    assert not tmp_path.joinpath("metrics.jsonl").exists()


def test_divergence_stops_every_rank_at_the_same_step(tmp_path):
    exploding = dataclasses.replace(TRAIN, lr_base=1e30, clip_threshold=1e38, warmup_steps=1)
    results = run_ranks(2, lambda comm: Trainer("tiny", MODEL, exploding, tmp_path, DATA,
                                                 LoopOptions(progress=False, chunk_steps=4), comm=comm).run())
    assert [r.stopped for r in results] == ["diverged", "diverged"]
    assert results[0].position == results[1].position
