"""The training loop: epochs of backend steps, evaluation, metrics, checkpoints, resume and Ctrl-C.

The loop hands the backend chunks of steps (indices, lrs, and the augmentation draws: flips, crops, cutouts, mixes) and reads the statistics back
once per chunk, so a GPU backend is never synchronised inside a chunk.

Data-parallel (docs/parallel.md): every rank runs this loop with the same schedule and a
communicator; the backend trains on the rank's share of each batch and sums the gradients. Rank 0
alone evaluates and writes (metrics, checkpoints, weights, plots, progress); after every chunk the
ranks agree on stopping and check that they hold the same weights (parallel.comm.agree).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litenet.errors import LiteNetError
from litenet.graph import residuals
from litenet.model import AnyModel, TrainConfig, config_from_dict, init_params, model_from_dict, param_layout
from litenet.train import schedule
from litenet.train.backends import backend_class
from litenet.train.checkpoint import CHECKPOINT_FILE, MetricsLog, Position, load_checkpoint, save_checkpoint
from litenet.train.monitors import RunColumns
from litenet.train.network import loss_and_dlogits
from litenet.train.progress import duration, process_seconds, progress_bar
from litenet.train.redraw import Redrawer, draw_figures
from litenet.train.parallel.comm import SingleRank, agree, local_columns, reduces
from litenet.train.run_lock import hold_run_folder
from litenet.weights import save_model
from litenet.paths import make_folder

EPOCH_LOSSES = "epoch_losses"  # a checkpoint's record of the interrupted epoch's losses so far
TRAIN_EVAL_IMAGES = 10_000  # training accuracy is measured on this fixed prefix, not all 50,000
REDRAW_SECONDS = 60  # how often the figures are redrawn during a run
HOST_WORK = ("evaluation", "saving", "plots")  # what the process report counts apart, beside start-up


@dataclass
class Split:
    images: np.ndarray  # uint8 (N, 32, 32, 3)
    labels: np.ndarray  # uint8 (N,)


@dataclass(frozen=True)
class TrainData:
    """What a run trains on and is scored on, and how the saved model describes it."""

    train_split: Split
    test_split: Split
    classes: tuple[str, ...]  # the class names, in label order, saved with the weights
    info: dict = field(default_factory=dict)  # saved as the model's "data" record (e.g. image counts)


@dataclass(frozen=True)
class LoopOptions:
    """How the loop runs: which backend, whether to resume or overwrite, how often to read back."""

    backend: str = "numpy"  # a name in litenet.train.backends.BACKENDS
    backend_options: dict = field(default_factory=dict)  # keyword arguments of the backend class
    resume: bool = False  # continue from the folder's checkpoint
    force: bool = False  # overwrite a run already in the folder
    chunk_steps: int = 50  # steps handed to the backend between two read-backs of the statistics
    progress: bool = True  # a progress bar (rank 0 only)
    announce: str | None = None  # the run's opening line, printed (rank 0) once the run folder is held
    stop_after_steps: int | None = None  # for tests: behave as if Ctrl-C came after N steps


@dataclass
class TrainResult:
    position: Position
    test_accuracy: float | None
    stopped: str  # "finished", "interrupted" or "diverged"


class Interrupt:
    """Turns the first Ctrl-C into a request to save and stop; a second one stops at once."""

    def __init__(self, announce: bool = True):
        self.requested, self.announce = False, announce  # one rank of a run announces for all
        self._previous = None

    def __enter__(self):
        # SIGTERM (kill, a batch scheduler, a container stopping) saves a checkpoint as Ctrl-C does.
        if _in_main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for s, handler in (self._previous or {}).items():
            signal.signal(s, handler)

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.announce:
            print("\nlitenet: stopping after the current steps and saving a checkpoint (Ctrl-C again to abort)",
                  file=sys.stderr)


def _in_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


class Trainer:
    """Trains one model into one folder; `run()` starts or resumes and returns how it ended."""

    def __init__(self, preset: str, model: AnyModel, train: TrainConfig, out: str | Path, data: TrainData,
                 options: LoopOptions = LoopOptions(), comm=None):
        self.preset, self.model, self.train = preset, model, train
        self.out = Path(out)
        self.data, self.options = data, options
        self.backend_options = dict(options.backend_options)  # plus the communicator when the ranks reduce
        self.comm = comm or SingleRank()
        self.writer = self.comm.rank == 0  # rank 0 alone evaluates and writes files
        local_columns(train.batch_size, self.comm)  # a batch that does not split over the ranks fails here
        if reduces(self.comm):
            self.backend_options["comm"] = self.comm
        self.steps_per_epoch = schedule.steps_per_epoch(len(data.train_split.images), train)
        if self.steps_per_epoch == 0:
            raise LiteNetError(f"{len(data.train_split.images)} training images make no batch of {train.batch_size}")
        self.total_steps = self.steps_per_epoch * train.epochs
        if train.warmup_steps > self.total_steps and self.writer:  # honoured, but not what anyone means
            print(f"litenet: note: warmup_steps {train.warmup_steps} is longer than this run's {self.total_steps} "
                  "steps: the learning rate never reaches its peak", file=sys.stderr)
        self.metrics = MetricsLog(self.out)
        self.columns = RunColumns(self.metrics.path)  # what the metrics hold, as arrays for the figures
        self.history: list[dict] = []
        self._chunk_start_params = None  # the weights at the last chunk boundary, for update ratios
        self._last_plot = time.perf_counter()
        self._resumed_losses: list[float] = []
        self._epoch_seconds: list[float] = []  # of the epochs this process trained
        self._saver = BackgroundWrites()
        self._redrawer = Redrawer(self.out)
        self._started_training: float | None = None  # the process's age when its first epoch began
        self._host_seconds = dict.fromkeys(HOST_WORK, 0.0)  # outside the epochs, by what it was spent on

    # -- set-up ----------------------------------------------------------------------------------

    def _config_json(self) -> str:
        return config_json(self.model, self.train)

    def _start(self):
        """Create the backend from a fresh initialisation or from the checkpoint (every rank reads it)."""
        has_checkpoint = check_run_folder(self.out, self.options.resume, self.options.force)
        if self.writer:
            make_folder(self.out)
        params = init_params(self.model, self.train.seed)
        backend = backend_class(self.options.backend)(self.model, self.train, params, **self.backend_options)
        preparation = backend.kernel_preparation
        if preparation is not None and self.writer:
            print(f"litenet train: kernels: {preparation.describe()}", flush=True)
        backend.load_dataset(self.data.train_split.images, self.data.train_split.labels)
        position = Position(0, 0, 0)
        if self.options.resume and has_checkpoint:
            state, position, saved_config = load_checkpoint(self.out)
            require_same_settings(self.out, saved_config, self._config_json())
            try:
                backend.load_state(state)
            except (KeyError, ValueError) as exc:  # a tensor missing, or of another shape
                raise LiteNetError(f"{self.out / CHECKPOINT_FILE}: damaged checkpoint (tensor {exc}); delete it "
                                   "and retrain with --force") from None
            self._resumed_losses = [float(v) for v in state.get(EPOCH_LOSSES, ())]
            if self.writer:
                done = "its one epoch is" if self.train.epochs == 1 else f"all {self.train.epochs} epochs are"
                line = (f"{self.out}: {done} done already; nothing left to train"
                        if position.epoch >= self.train.epochs else
                        f"resuming {self.out} from epoch {position.epoch + 1} of {self.train.epochs}, step "
                        f"{position.step_in_epoch} of {self.steps_per_epoch} (step {position.global_step} of "
                        f"{self.total_steps} in all)")
                print(f"litenet train: {line}", file=sys.stderr, flush=True)
                self.metrics.truncate_after(position)
                kept = self.metrics.read()
                self.history = [r for r in kept if r.get("type") == "epoch"]
                self.columns.add(kept)
        elif self.writer:
            self.metrics.path.unlink(missing_ok=True)
        self.comm.barrier()  # every rank has read the checkpoint before rank 0 may write the next one
        self._write([{"type": "run", "preset": self.preset, "backend": self.options.backend,
                      "world_size": self.comm.world_size,
                      "resumed_at_step": position.global_step if self.options.resume else None,
                      "params": [p.name for p in param_layout(self.model)], "blocks": self.model.blocks,
                      "residuals": [op.name for op in residuals(self.model)],
                      "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps,
                      "kernel_preparation": None if preparation is None else preparation.record(),
                      "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}])
        self._chunk_start_params = backend.weights()
        return backend, position

    def _write(self, records: list[dict]) -> None:
        if self.writer:
            self.metrics.write(records)
            self.columns.add(records)

    @contextlib.contextmanager
    def _host_work(self, kind: str):
        """Count the wall time of the body against `kind` (one of HOST_WORK) in the process report."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._host_seconds[kind] += time.perf_counter() - start

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        """Train while holding the run folder (rank 0 writes it; the other ranks only read)."""
        with hold_run_folder(self.out) if self.writer else contextlib.nullcontext():
            if self.writer and self.options.announce:  # not before: a held folder refuses the run first
                print(self.options.announce, flush=True)
            return self._run()

    def _run(self) -> TrainResult:
        backend, position = self._start()
        self._started_training = process_seconds()
        bar = progress_bar(self.total_steps, position.global_step, self.steps_per_epoch,
                           self.options.progress and self.writer)
        try:
            with Interrupt(announce=self.writer) as interrupt:
                for epoch in range(position.epoch, self.train.epochs):
                    ended = self._run_epoch(backend, epoch, position.step_in_epoch, interrupt, bar)
                    position = Position(epoch + 1, 0, (epoch + 1) * self.steps_per_epoch)
                    if isinstance(ended, TrainResult):
                        break
                else:
                    ended = None
        finally:
            bar.close()  # before any last line, so none is drawn over the bar
            with self._host_work("saving"):
                self._saver.close()  # every file written (or its error raised) before the run ends
            with self._host_work("plots"):
                self._redrawer.close()  # the redraw in flight; then the last one, from every record
            if self.writer:
                self._plot()
        if ended is not None:
            if ended.stopped == "interrupted" and self.writer:
                print(f"litenet: saved a checkpoint at step {ended.position.global_step} in {self.out}; "
                      "continue with --resume", file=sys.stderr)
            return ended
        if self.writer and self._epoch_seconds:
            self._report_process()
        accuracy = self.history[-1]["test_accuracy"] if self.history else None
        return TrainResult(position, accuracy, "finished")

    def _run_epoch(self, backend, epoch: int, first_step: int, interrupt: Interrupt, bar):
        batches = schedule.epoch_batches(len(self.data.train_split.images), self.train, epoch)
        draws = schedule.epoch_augments(batches, self.train, epoch)  # flips, crops, cutouts, mixes: those on
        # the epoch's losses so far: a run resumed inside an epoch reports the whole epoch's mean
        started, losses = time.perf_counter(), list(self._resumed_losses) if first_step else []
        step, stop_at = first_step, self.options.stop_after_steps
        unwritten = None  # the last chunk's records, written while the backend runs the next chunk
        try:
            while step < self.steps_per_epoch:
                count = min(self.options.chunk_steps, self.steps_per_epoch - step)
                global_step = epoch * self.steps_per_epoch + step
                if stop_at is not None:
                    count = min(count, stop_at - global_step)
                lrs = schedule.learning_rates(global_step, count, self.total_steps, self.train)
                part = slice(step, step + count)
                backend.train_steps(batches[part], lrs, **{name: d[part] for name, d in draws.items()})
                unwritten = self._write_chunk(unwritten)  # while a GPU runs the chunk just handed over
                stats = backend.fetch_stats()  # of the global batch: every rank holds the same numbers
                params = backend.weights()
                if self.writer:
                    unwritten = (stats, lrs, global_step, epoch, params, count)
                if not np.all(np.isfinite(stats["loss"])):
                    unwritten = self._write_chunk(unwritten)
                    bad = global_step + int(np.argmax(~np.isfinite(stats["loss"])))
                    if self.writer:
                        kept = (f"The checkpoint in {self.out} (saved before step {bad}, every loss finite) is kept"
                                if (self.out / CHECKPOINT_FILE).is_file() else
                                f"No checkpoint was saved before it, so {self.out} holds none")
                        print(f"litenet: the loss became {stats['loss'][bad - global_step]} at step {bad}; stopping. "
                              f"{kept} (lower lr_base or check the data).", file=sys.stderr)
                    return TrainResult(Position(epoch, step, global_step), None, "diverged")
                stop = agree(self.comm, interrupt.requested, params)  # the same answer on every rank
                losses.extend(stats["loss"])
                step += count
                bar.update(count)
                bar.set_postfix(loss=f"{np.mean(stats['loss']):.4f}", refresh=False)
                at_limit = stop_at is not None and epoch * self.steps_per_epoch + step >= stop_at
                if (stop or at_limit) and step < self.steps_per_epoch:
                    unwritten = self._write_chunk(unwritten)
                    position = Position(epoch, step, epoch * self.steps_per_epoch + step)
                    self._save(backend, position, epoch_losses=losses)
                    return TrainResult(position, None, "interrupted")
        finally:
            self._write_chunk(unwritten)  # every chunk trained has its records, whatever ended the loop
        position = Position(epoch + 1, 0, (epoch + 1) * self.steps_per_epoch)
        at_limit = stop_at is not None and position.global_step >= stop_at
        record = {}
        if self.writer:
            seconds = time.perf_counter() - started
            with self._host_work("evaluation"):
                record = self._evaluate(backend, epoch, float(np.mean(losses)), seconds, step - first_step)
            self.history.append(record)
            self._epoch_seconds.append(seconds)
            self._write([record])
            with self._host_work("saving"):
                self._save(backend, position)
            self._plot(every_seconds=REDRAW_SECONDS)
            self._report_epoch(record, bar)
        stop = agree(self.comm, interrupt.requested, backend.weights())  # Ctrl-C during the evaluation
        if (stop or at_limit) and epoch + 1 < self.train.epochs:
            return TrainResult(position, record.get("test_accuracy"), "interrupted")
        return None

    def _write_chunk(self, chunk: tuple | None) -> None:
        """A chunk's step records, the last with the weights' change over the chunk (docs/insight.md). The
        loop writes them after handing the backend the next chunk, so that a GPU need not wait for the host
        to format and write them; returns what is left unwritten (nothing), for `unwritten = …`."""
        if chunk is not None:
            stats, lrs, global_step, epoch, params, count = chunk
            records = _step_records(stats, lrs, global_step, epoch)
            records[-1].update(self._weight_change(params, count))
            self._write(records)
        return None

    def _weight_change(self, params: np.ndarray, steps: int) -> dict:
        """Per tensor ‖w‖ and ‖Δw‖/‖w_start‖ over the chunk just run (docs/insight.md).

        Measured once per chunk from backend.state(), so no backend needs a new statistic and a GPU
        is not synchronised inside a chunk; a tensor that starts at zero (β) has no ratio (None).
        """
        before, self._chunk_start_params = self._chunk_start_params, params
        norms, ratios = [], []
        for p in param_layout(self.model):
            w0 = before[p.offset:p.offset + p.size].astype(np.float64)
            w1 = params[p.offset:p.offset + p.size].astype(np.float64)
            start = float(np.sqrt(np.dot(w0, w0)))
            norms.append(float(f"{np.sqrt(np.dot(w1, w1)):.5g}"))
            ratios.append(float(f"{np.linalg.norm(w1 - w0) / start:.5g}") if start > 0 else None)
        return {"update_steps": steps, "weight_norms": norms, "update_ratio": ratios}

    # -- evaluation, saving, reporting -------------------------------------------------------------

    def _evaluate(self, backend, epoch: int, train_loss: float, seconds: float, steps: int) -> dict:
        test_loss, test_acc = self.score(backend, self.data.test_split)
        train = self.data.train_split
        train_eval = Split(train.images[:TRAIN_EVAL_IMAGES], train.labels[:TRAIN_EVAL_IMAGES])
        _, train_acc = self.score(backend, train_eval)
        return {"type": "epoch", "epoch": epoch, "step": (epoch + 1) * self.steps_per_epoch,
                "train_loss": train_loss, "train_accuracy": train_acc, "test_loss": test_loss,
                "test_accuracy": test_acc, "seconds": round(seconds, 3),
                "images_per_second": round(steps * self.train.batch_size / max(seconds, 1e-9), 1)}

    def score(self, backend, split: Split) -> tuple[float, float]:
        """(mean loss, accuracy) of the backend's current weights on a split."""
        logits = backend.logits(split.images).astype(np.float64)
        labels = np.asarray(split.labels, np.int64)
        loss = loss_and_dlogits(logits, labels, self.train.loss, self.train.margin, self.train.label_smoothing)[0]
        return float(loss), float(np.mean(logits.argmax(axis=1) == labels))

    def _save(self, backend, position: Position, epoch_losses: list[float] = ()) -> None:
        """Checkpoint and weights; inside an epoch the checkpoint keeps the epoch's losses so far. The state
        is read now; the files are written on the saver's thread while the next epoch trains."""
        if not self.writer:
            return
        state = backend.state()
        extra = {EPOCH_LOSSES: np.asarray(epoch_losses, np.float64)} if len(epoch_losses) else {}
        last = self.history[-1] if self.history else {}
        model_info = dict(classes=list(self.data.classes), epochs_done=position.epoch, global_step=position.global_step,
                          backend=self.options.backend, test_accuracy=last.get("test_accuracy"),
                          train_accuracy=last.get("train_accuracy"), data=self.data.info)

        def write():
            save_checkpoint(self.out, {**state, **extra}, position, self._config_json())
            save_model(self.out, state["params"], self.model, self.train, self.preset, **model_info)
        self._saver.submit(write)

    def _plot(self, every_seconds: float = 0.0) -> None:
        """Redraw curves.png and gradients.png (about a second together): during the run at most every
        `every_seconds`, in a child process while the next epochs train (redraw.py); at the end
        (`every_seconds` 0), here."""
        if not self.history or time.perf_counter() - self._last_plot < every_seconds:
            return
        with self._host_work("plots"):
            if every_seconds:
                self._redrawer.submit(self.columns.log())  # the columns as they are now
            else:
                draw_figures(self.columns.log(), self.out)
        self._last_plot = time.perf_counter()

    def _report_process(self) -> None:
        """The process's wall time so far against the epochs it trained, and where the rest went: start-up
        (imports, data, the backend and its kernels), evaluation, saving, plots, and other (the loop
        between epochs); one line, and a "process" record in metrics.jsonl."""
        process, epochs = process_seconds(), sum(self._epoch_seconds)
        ratio = round(process / max(epochs, 1e-9), 2)  # rounded once, so the line and the record agree
        spent = {"start-up": self._started_training or 0.0, **self._host_seconds}
        spent["other"] = max(0.0, process - epochs - sum(spent.values()))
        self._write([{"type": "process", "seconds": round(process, 3), "epoch_seconds": round(epochs, 3),
                      "epochs": len(self._epoch_seconds), "ratio": ratio,
                      "beside_epochs": {k: round(v, 3) for k, v in spent.items()}}])
        parts = ", ".join(f"{k} {seconds(v)}" for k, v in spent.items())
        print(f"litenet train: process {seconds(process)} for {seconds(epochs)} of epochs ({ratio:.2f}×); "
              f"beside them: {parts}", flush=True)

    def _report_epoch(self, r: dict, bar) -> None:
        done = r["epoch"] + 1
        eta = (self.train.epochs - done) * r["seconds"]
        bar.write(f"epoch {done}/{self.train.epochs}  loss {r['train_loss']:.4f}  "
                  f"train {100 * r['train_accuracy']:.2f}%  test {100 * r['test_accuracy']:.2f}%  "
                  f"{r['seconds']:.1f} s ({r['images_per_second']:.0f} img/s)  ETA {duration(eta)}")


class BackgroundWrites:
    """One worker thread for the run's file writes, one write in flight at most: a checkpoint is written
    while the next epoch trains, and the next one waits for it, so they land in order. A write's error is
    raised by the next submit or wait."""

    def __init__(self):
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def submit(self, write) -> None:
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="litenet-save")
        self._pending = self._pool.submit(write)

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Wait for the last write and end the thread (a later submit starts another)."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None


def seconds(value: float) -> str:
    """"118 s", "6.1 s": tenths where they are worth reading."""
    return f"{value:.0f} s" if value >= 100 else f"{value:.1f} s"


def config_json(model: AnyModel, train: TrainConfig) -> str:
    """The settings a checkpoint records; a resumed run must have the same (any number of ranks)."""
    return json.dumps({"model": dataclasses.asdict(model), "train": dataclasses.asdict(train)}, sort_keys=True)


def same_settings(saved: str, current: str) -> bool:
    """Whether a checkpoint's `config_json` holds this run's settings. A setting LiteNet gained after
    the checkpoint was written (activations, cutout_size, …) reads as its default — what that run
    did, since every new setting's default keeps the behaviour from before it — so an upgrade does
    not strand a run half-trained."""
    def settings(text: str) -> dict:
        doc = json.loads(text)
        try:
            return json.loads(config_json(model_from_dict(doc["model"]), config_from_dict(TrainConfig, doc["train"])))
        except (LiteNetError, KeyError, TypeError):  # a setting since removed, or no config at all
            return doc
    return settings(saved) == settings(current)


def require_same_settings(out: Path, saved: str, current: str) -> None:
    """Refuse to resume the run in `out` when its checkpoint's settings are not this run's, naming each."""
    if not same_settings(saved, current):
        old, new = (json.loads(text) for text in (saved, current))
        changed = [f"--{k.replace('_', '-')}: recorded {old[part].get(k)}, given {new[part].get(k)}"
                   for part in ("model", "train") for k in sorted(set(old.get(part, {})) | set(new.get(part, {})))
                   if isinstance(old.get(part), dict) and old[part].get(k) != new[part].get(k)]
        raise LiteNetError(f"{out}: the checkpoint was trained with other settings ({'; '.join(changed) or 'unknown'}); "
                           "resume without those options, or use --force to start over")


def check_run_folder(out: Path, resume: bool, force: bool, config: str | None = None) -> bool:
    """Refuse to overwrite a run, to resume nothing, or (given the `config_json` of this run) to
    resume one trained with other settings. The launcher asks once before any rank starts.
    Returns whether `out` holds a checkpoint."""
    has_checkpoint = (Path(out) / CHECKPOINT_FILE).exists()
    if has_checkpoint and not (resume or force):
        raise LiteNetError(f"{out} already holds a training run; add --resume to continue it "
                           "or --force to start over (which overwrites it)")
    if resume and not has_checkpoint:
        raise LiteNetError(f"{out}: no checkpoint to resume from; drop --resume to start a new run")
    if resume and config is not None:
        require_same_settings(out, load_checkpoint(Path(out))[2], config)
    return has_checkpoint


def _step_records(stats: dict, lrs: np.ndarray, first_step: int, epoch: int) -> list[dict]:
    records = []
    for i in range(len(stats["loss"])):
        records.append({"type": "step", "step": first_step + i, "epoch": epoch, "lr": float(f"{lrs[i]:.6g}"),
                        "loss": float(f"{stats['loss'][i]:.7g}"), "grad_norm": float(f"{stats['grad_norm'][i]:.6g}"),
                        "clipped": bool(stats["clipped"][i]),
                        "grad_norms": [float(f"{v:.5g}") for v in np.sqrt(stats["grad_sq"][i])],
                        "path": [[float(f"{v:.5g}") for v in block] for block in stats["path"][i]]})
    return records
