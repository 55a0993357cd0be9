"""The trainer: determinism, exact resume, Ctrl-C, divergence, refusing to overwrite, outputs."""

import dataclasses
import json

import numpy as np
import pytest
from train_fixtures import TINY_MODEL, TINY_TRAIN, synthetic_split

from litenet.errors import LiteNetError
from litenet.train.backends import BACKENDS
from litenet.train.checkpoint import load_checkpoint, read_metrics
from litenet.train.trainer import LoopOptions, TrainData, Trainer
from litenet.weights import load_model

TRAIN, TEST = synthetic_split(160, 0), synthetic_split(64, 1)
CLASSES = tuple(f"c{i}" for i in range(10))
DATA = TrainData(TRAIN, TEST, CLASSES)


def make(out, train=TINY_TRAIN, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("chunk_steps", 4)
    return Trainer("tiny", TINY_MODEL, train, out, DATA, LoopOptions(**kw))


def step_losses(folder):
    return [r["loss"] for r in read_metrics(folder / "metrics.jsonl") if r["type"] == "step"]


def test_writes_the_documented_outputs(tmp_path):
    result = make(tmp_path).run()
    assert result.stopped == "finished" and result.position.epoch == 3
    assert {"weights.safetensors", "config.json", "metrics.jsonl", "checkpoint.safetensors", "curves.png"} <= {
        p.name for p in tmp_path.iterdir()}
    params, model, train, doc = load_model(tmp_path)
    assert model == TINY_MODEL and train == TINY_TRAIN and doc["classes"] == list(CLASSES)
    records = read_metrics(tmp_path / "metrics.jsonl")
    epochs = [r for r in records if r["type"] == "epoch"]
    assert [r["epoch"] for r in epochs] == [0, 1, 2] and doc["test_accuracy"] == epochs[-1]["test_accuracy"]
    steps = [r for r in records if r["type"] == "step"]
    assert [r["step"] for r in steps] == list(range(30))
    assert len(steps[0]["grad_norms"]) == 15 and len(steps[0]["path"]) == 2
    # the per-tensor norms make up the global one
    assert np.sqrt(np.sum(np.square(steps[0]["grad_norms"]))) == pytest.approx(steps[0]["grad_norm"], rel=1e-4)


def test_a_chunks_records_are_written_while_the_next_chunk_trains(tmp_path, monkeypatch):
    """The host formats and writes a chunk's records after handing over the next chunk (a GPU is not left
    waiting for it); every record is still written, in order, by the end of the epoch."""
    from train_fixtures import WatchingBackend

    monkeypatch.setitem(BACKENDS, "watching", "train_fixtures:WatchingBackend")
    monkeypatch.setattr(WatchingBackend, "seen", [])
    monkeypatch.setattr(WatchingBackend, "folder", tmp_path)
    make(tmp_path, backend="watching").run()  # 10 steps an epoch in chunks of 4, 4 and 2
    assert WatchingBackend.seen == [0, 0, 4, 10, 10, 14, 20, 20, 24]
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if r["type"] == "step"]
    assert steps == list(range(30))


def test_kernel_preparation_and_process_time_are_reported_once(tmp_path, monkeypatch, capsys):
    """A backend that compiles kernels has its cost said in one line and kept in the run record; at the end
    the process's wall time is set against the epochs it trained, in a line and a "process" record."""
    monkeypatch.setitem(BACKENDS, "prepared", "train_fixtures:PreparedBackend")
    make(tmp_path, backend="prepared").run()
    out = capsys.readouterr().out
    assert out.count("litenet train: kernels:") == 1
    assert "litenet train: kernels: 3 compiled in 1.5 s (2 workers), 1 cached" in out
    records = read_metrics(tmp_path / "metrics.jsonl")
    run = next(r for r in records if r["type"] == "run")
    assert run["kernel_preparation"] == {"kernels": 4, "compiled": 3, "workers": 2, "seconds": 1.5, "compile_seconds": 2.8,
                              "target": "sm_90a"}
    process = [r for r in records if r["type"] == "process"]
    epochs = sum(r["seconds"] for r in records if r["type"] == "epoch")
    assert len(process) == 1 and process[0]["epochs"] == 3
    assert process[0]["epoch_seconds"] == pytest.approx(epochs, abs=0.01)
    assert process[0]["seconds"] > process[0]["epoch_seconds"]  # the interpreter's start and the imports count
    assert process[0]["ratio"] == pytest.approx(process[0]["seconds"] / process[0]["epoch_seconds"], rel=0.1)  # rounded
    assert f"of epochs ({process[0]['ratio']:.2f}×)" in out.splitlines()[-1]
    # where the time beside the epochs went: each part counted, together the whole difference
    beside = process[0]["beside_epochs"]
    assert list(beside) == ["start-up", "evaluation", "saving", "plots", "other"]
    assert beside["start-up"] > 0 and beside["evaluation"] > 0 and beside["plots"] > 0
    assert min(beside.values()) >= 0
    assert process[0]["epoch_seconds"] + sum(beside.values()) == pytest.approx(process[0]["seconds"], abs=0.05)
    assert "beside them: start-up " in out.splitlines()[-1]


def test_the_figures_are_drawn_from_the_records_written_not_read_back(tmp_path, monkeypatch):
    """The trainer keeps the run's columns as it writes them (parsing metrics.jsonl again cost seconds
    a redraw on long runs); they are what reading the file gives, resumed runs included."""
    from litenet.train import monitors

    make(tmp_path, stop_after_steps=14).run()
    trainer = make(tmp_path, resume=True)
    monkeypatch.setattr(monitors, "read_metrics", lambda path: pytest.fail("the figures re-read metrics.jsonl"))
    trainer.run()
    monkeypatch.undo()
    kept, read = trainer.columns.log(), monitors.read_run(tmp_path)
    assert [r["epoch"] for r in kept.epochs] == [r["epoch"] for r in read.epochs] == [0, 1, 2]
    for name in ("step", "lr", "loss", "grad_norm", "clipped", "grad_norms", "path", "chunk_step", "chunk_len",
                 "update_ratio", "weight_norms"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(read, name), err_msg=name)
    assert list(kept.step) == list(range(30))


def test_checkpoints_are_written_behind_the_loop_in_order_and_their_errors_surface(tmp_path):
    """A write runs on the saver's thread while the loop goes on; the next write waits for it, and its
    error is raised by the next submit or wait, not lost."""
    import threading

    from litenet.train.trainer import BackgroundWrites

    saver, order, release = BackgroundWrites(), [], threading.Event()
    saver.submit(lambda: (release.wait(5), order.append(1)))
    assert order == []  # the loop was not held
    release.set()
    saver.submit(lambda: order.append(2))
    saver.wait()
    assert order == [1, 2]
    saver.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        saver.close()
    saver.submit(lambda: order.append(3))  # a closed saver starts a thread again
    saver.close()
    assert order == [1, 2, 3]


def test_figures_are_redrawn_during_the_run_by_the_redrawer_and_last_here(tmp_path, monkeypatch):
    """During the run the trainer hands the redrawer the columns as they are (it does not wait for the
    drawing); the last figures are drawn here at the end, from every epoch, after the redrawer is done."""
    from litenet.train import redraw
    from litenet.train import trainer as trainer_module

    events = []
    monkeypatch.setattr(trainer_module, "REDRAW_SECONDS", 1e-9)
    monkeypatch.setattr(redraw.Redrawer, "submit", lambda self, run: events.append(("child", len(run.epochs))))
    monkeypatch.setattr(redraw.Redrawer, "close", lambda self: events.append(("closed",)))
    monkeypatch.setattr(trainer_module, "draw_figures", lambda run, folder: events.append(("here", len(run.epochs))))
    make(tmp_path).run()
    assert events == [("child", 1), ("child", 2), ("child", 3), ("closed",), ("here", 3)]


def test_the_redrawer_draws_in_a_child_process_one_drawing_at_a_time(tmp_path, monkeypatch):
    """A redraw runs in another process (drawing would hold this one's loop): submit returns before the
    figures exist, a redraw asked for while one is in flight is skipped, close waits for the one in flight,
    and the figures are then there, drawn by the child from the columns handed over."""
    pytest.importorskip("matplotlib")
    from litenet.train import plots
    from litenet.train.monitors import RunColumns
    from litenet.train.redraw import Redrawer

    make(tmp_path).run()
    for name in ("curves.png", "gradients.png"):
        (tmp_path / name).unlink()
    columns = RunColumns(tmp_path / "metrics.jsonl")
    columns.add(read_metrics(tmp_path / "metrics.jsonl"))
    monkeypatch.setattr(plots, "plot_training", lambda *a: pytest.fail("drawn in the trainer's process"))
    redrawer = Redrawer(tmp_path)
    assert redrawer.submit(columns.log())
    handed_over = redrawer._columns  # the pickled columns the child reads
    assert handed_over.is_file()
    assert not redrawer.submit(columns.log())  # in flight: skipped
    assert not (tmp_path / "curves.png").exists()  # not waited for (a fresh interpreter imports matplotlib first)
    redrawer.close()
    assert (tmp_path / "curves.png").stat().st_size > 0 and (tmp_path / "gradients.png").stat().st_size > 0
    assert not redrawer.busy and not handed_over.exists()


def test_numpy_backend_reports_no_kernels(tmp_path, capsys):
    make(tmp_path).run()
    assert "kernels:" not in capsys.readouterr().out
    assert next(r for r in read_metrics(tmp_path / "metrics.jsonl") if r["type"] == "run")["kernel_preparation"] is None


def test_learns_the_synthetic_task(tmp_path):
    train = dataclasses.replace(TINY_TRAIN, epochs=8)
    assert make(tmp_path, train).run().test_accuracy > 0.35  # chance is 0.1


def test_same_seed_same_losses(tmp_path):
    make(tmp_path / "a").run()
    make(tmp_path / "b").run()
    assert step_losses(tmp_path / "a") == step_losses(tmp_path / "b")


@pytest.mark.parametrize("stop_at,augment", [(7, "none"), (10, "none"), (17, "none"),  # mid-epoch, at an epoch's
                                             (7, "crop+flip+cutout"), (9, "flip+cutmix")])  # end, mid-chunk
def test_resume_ends_with_the_same_weights(tmp_path, stop_at, augment):
    train = dataclasses.replace(TINY_TRAIN, augment=augment)
    make(tmp_path / "whole", train).run()
    first = make(tmp_path / "split", train, stop_after_steps=stop_at).run()
    assert first.stopped == "interrupted" and first.position.global_step == stop_at
    _, position, _ = load_checkpoint(tmp_path / "split")
    assert position.global_step == stop_at
    make(tmp_path / "split", train, resume=True).run()
    whole, split = load_model(tmp_path / "whole")[0], load_model(tmp_path / "split")[0]
    assert np.array_equal(whole, split)
    assert step_losses(tmp_path / "whole") == step_losses(tmp_path / "split")


def test_refuses_to_overwrite_a_run(tmp_path):
    make(tmp_path, stop_after_steps=3).run()
    before = (tmp_path / "checkpoint.safetensors").read_bytes()
    with pytest.raises(LiteNetError, match="--resume"):
        make(tmp_path).run()
    assert (tmp_path / "checkpoint.safetensors").read_bytes() == before


def test_resume_with_other_settings_is_refused(tmp_path):
    make(tmp_path, stop_after_steps=3).run()
    with pytest.raises(LiteNetError, match="other settings"):
        make(tmp_path, dataclasses.replace(TINY_TRAIN, lr_base=0.5), resume=True).run()


def test_resume_without_checkpoint_is_refused(tmp_path):
    with pytest.raises(LiteNetError, match="no checkpoint"):
        make(tmp_path, resume=True).run()


def test_divergence_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    make(tmp_path, dataclasses.replace(TINY_TRAIN, epochs=1)).run()
    good = (tmp_path / "checkpoint.safetensors").read_bytes()
    exploding = dataclasses.replace(TINY_TRAIN, epochs=3, lr_base=1e30, clip_threshold=1e38, warmup_steps=1)
    # a fresh run into another folder diverges and keeps no state past its last good epoch
    result = make(tmp_path / "boom", exploding).run()
    assert result.stopped == "diverged"
    assert not (tmp_path / "boom" / "checkpoint.safetensors").exists()
    assert (tmp_path / "checkpoint.safetensors").read_bytes() == good


def test_metrics_are_not_duplicated_on_resume(tmp_path):
    make(tmp_path, stop_after_steps=13).run()
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"type":"step","step":13,"loss":1')  # a line cut short by a crash
    make(tmp_path, resume=True).run()
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if r["type"] == "step"]
    assert steps == list(range(30))


def test_config_records_accuracy_and_classes(tmp_path):
    make(tmp_path).run()
    doc = json.loads((tmp_path / "config.json").read_text())
    assert doc["format"] == "litenet-config/1" and doc["epochs_done"] == 3 and 0 <= doc["test_accuracy"] <= 1


def test_an_epoch_resumed_inside_reports_the_whole_epochs_mean_loss(tmp_path):
    """Ctrl-C in the middle of an epoch, then --resume: the epoch's train_loss is the mean over all of its
    steps (the checkpoint kept the losses before the interruption), as in an uninterrupted run."""
    def epoch_losses(folder):
        return [r["train_loss"] for r in read_metrics(folder / "metrics.jsonl") if r["type"] == "epoch"]

    make(tmp_path / "whole").run()
    make(tmp_path / "split", stop_after_steps=13).run()  # an epoch is 10 steps: stops inside the second
    make(tmp_path / "split", resume=True).run()
    assert epoch_losses(tmp_path / "split") == pytest.approx(epoch_losses(tmp_path / "whole"), rel=1e-12)


def test_settings_out_of_range_are_refused_naming_the_field_and_range():
    from litenet.errors import UsageError
    from litenet.model import MixerConfig, TrainConfig

    for make_config, text in ((lambda: TrainConfig(epochs=0), "epochs must be ≥ 1 and ≤ 100000; got 0"),
                              (lambda: TrainConfig(lr_base=-1.0), "lr_base must be > 0.0; got -1.0"),
                              (lambda: TrainConfig(label_smoothing=1.0, loss="cross-entropy"), "label_smoothing"),
                              (lambda: TrainConfig(augment="crop+rotate"), "augment must be none or"),
                              (lambda: MixerConfig(patch=5), "patch must be one of 1, 2, 4, 8, 16, 32")):
        with pytest.raises(UsageError, match=text.replace("+", r"\+")):
            make_config()


def test_a_checkpoint_from_before_a_new_setting_resumes(tmp_path):
    """A checkpoint written before LiteNet had a setting (here `activations`) resumes: the missing
    setting reads as its default, which is what that run did."""
    make(tmp_path / "whole").run()
    make(tmp_path / "split", stop_after_steps=7).run()
    from litenet.train.checkpoint import save_checkpoint
    state, position, config = load_checkpoint(tmp_path / "split")
    older = json.loads(config)
    del older["train"]["activations"]
    save_checkpoint(tmp_path / "split", state, position, json.dumps(older, sort_keys=True))
    make(tmp_path / "split", resume=True).run()
    assert np.array_equal(load_model(tmp_path / "whole")[0], load_model(tmp_path / "split")[0])


def test_a_checkpoint_with_a_setting_since_removed_is_refused(tmp_path):
    make(tmp_path, stop_after_steps=3).run()
    from litenet.train.checkpoint import save_checkpoint
    state, position, config = load_checkpoint(tmp_path)
    other = json.loads(config)
    other["train"]["momentum_schedule"] = "nesterov"
    save_checkpoint(tmp_path, state, position, json.dumps(other, sort_keys=True))
    with pytest.raises(LiteNetError, match="other settings"):
        make(tmp_path, resume=True).run()
