"""LiveNetwork: a network in LiteNet Studio — built from a layer list, trained step by step on CIFAR-10,
looked into, saved as a preset. The Python model behind the page, with no thread and no page of its own:
controller.py drives it from one worker thread; views.py and takeout.py add the image views and export.

A step is training's own: the preset's schedule, batches, augmentation and optimiser through a training
backend (NumpyBackend's step, watched by an Inspector), so what the page shows is what `litenet train`
computes. A step whose loss, gradients or new weights are not finite is undone and located (nan.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litenet import graph, layers
from litenet.atomic import atomic_write_text
from litenet.errors import LiteNetError
from litenet.model import (AUGMENTS, OPTIMIZERS, AnyModel, LayersConfig, TrainConfig, init_params, load_preset,
                           param_count, preset_to_toml)
from litenet.studio import nan
from litenet.studio.inspector import Inspector
from litenet.train import augment, schedule
from litenet.train.backends import CUDA_FAMILIES, backend_class
from litenet.train.network import loss_and_dlogits
from litenet.train.numpy_backend import NumpyBackend

MAX_PARAMS = 20_000_000  # refused before allocating: 20 M float32 parameters and their moments ≈ 240 MB
HELD_OUT = 500  # test images scored as training goes (a fixed batch, not the whole test set)
EVAL_EVERY = 20  # steps between two scores of the held-out batch
MAX_TENSOR = 1 << 24  # values of one tensor sent whole on request (64 MB of float32)
SETTINGS = ("lr_base", "batch_size", "optimizer", "augment", "epochs")  # what the page may change


@dataclass(frozen=True)
class StudioData:
    """The images the Studio trains on and scores, and where they came from (export re-opens them)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    classes: tuple[str, ...]
    source: dict = field(default_factory=dict)  # open_cifar10's data= and maps=

    @classmethod
    def open(cls, data: str | None = None, maps: str | None = None) -> StudioData:
        """CIFAR-10 through litenet.data (its usual search order; converted to memory maps once)."""
        from litenet.data import open_cifar10

        ds = open_cifar10(data=data, maps=maps, progress=False)
        return cls(ds.train.images, ds.train.labels, ds.test.images, ds.test.labels, tuple(ds.classes),
                   {"data": data, "maps": maps})


@dataclass
class Curves:
    """Every step's loss and lr, and the held-out batch's loss and accuracy every EVAL_EVERY steps."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    held_out: list[dict] = field(default_factory=list)

    def thinned(self, points: int = 2000) -> dict:
        """At most `points` of the step curves (every k-th), for a page that connects afresh."""
        k = max(1, len(self.step) // points)
        return {"step": self.step[::k], "loss": self.loss[::k], "lr": self.lr[::k], "held_out": self.held_out}


class LiveNetwork:
    """One network at a time: `build`, `step`, `probe`, `save_preset`; views.py and takeout.py read it."""

    def __init__(self, data: StudioData, preset: str = "litenet-mixer-cpu", backend: str = "numpy"):
        self.data, self.backend_name = data, backend
        self.load_preset(preset)

    # -- the network ------------------------------------------------------------------------------

    def load_preset(self, name_or_path: str) -> None:
        """Take a preset's network and recipe (any family) and start afresh."""
        preset = load_preset(name_or_path)
        self.name, self.description = preset.name, preset.description
        self._start(preset.model, preset.train)

    def build(self, layer_dicts: list[dict]) -> None:
        """Take a new layer list (refused in one line if it cannot be built) and start afresh."""
        model = self.model_of(layer_dicts)
        if model != self.model:
            self._start(model, self.train)
            self.name, self.description = "studio-network", f"composed in LiteNet Studio from {self.name}"

    def model_of(self, layer_dicts: list[dict]) -> AnyModel:
        """The model config of a layer list: the current family's own list keeps that family (the CUDA backend
        trains it), any other list is of the layers family. Refused in one line if it cannot be built."""
        listed = layers.from_dicts(layer_dicts)
        if listed == graph.layers_of(self.model):
            return self.model
        return LayersConfig(layers=listed, classes=self.model.classes, ln_eps=self.model.ln_eps)

    def _start(self, model: AnyModel, train: TrainConfig) -> None:
        count = param_count(model)
        if count > MAX_PARAMS:
            raise LiteNetError(f"{count:,} parameters: the Studio trains networks of up to {MAX_PARAMS:,}; "
                               "narrow a layer or remove a block")
        backend = self._new_backend(model, train, init_params(model, train.seed))  # a refusal changes nothing
        self.model, self.train, self.ops = model, train, graph.ops_of(model)
        self._fresh(backend)

    def reset(self) -> None:
        """Fresh weights from the recipe's seed, step 0, empty curves; the settings stay."""
        self._fresh(self._new_backend(self.model, self.train, init_params(self.model, self.train.seed)))

    def _new_backend(self, model: AnyModel, train: TrainConfig, params: np.ndarray):
        """The backend asked for, loaded with the training images; NumPy for a family CUDA does not train."""
        name = self.backend_name if model.family in CUDA_FAMILIES else "numpy"
        backend = backend_class(name)(model, train, params)
        backend.load_dataset(self.data.train_images, self.data.train_labels)
        return backend

    def _fresh(self, backend) -> None:
        self.backend = backend
        self.inspector = Inspector(self.model)
        self.curves, self.steps, self.alarm = Curves(), 0, None
        self._plan, self._row, self._epoch = None, 0, 0
        self.last_batch = None  # (images, labels, mix) of the last step: what an inspection re-runs

    def check(self, layer_dicts: list[dict]) -> dict:
        """A layer list's shapes, problems, parameters and FLOPs per image, layer by layer (nothing is built)."""
        return check_layers(layer_dicts, self.model.classes, self.model.ln_eps)

    # -- training ------------------------------------------------------------------------------------

    def configure(self, **settings) -> None:
        """Change the recipe (SETTINGS only); a new optimiser starts its moments afresh, the weights stay."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise LiteNetError(f"the Studio does not set {', '.join(unknown)}; it sets {', '.join(SETTINGS)}")
        train = dataclasses.replace(self.train, **settings)  # TrainConfig checks every value
        keep_moments = train.optimizer == self.train.optimizer
        state = self.backend.state()
        if not keep_moments:
            state = {"params": state["params"]}
        backend = self._new_backend(self.model, train, state["params"])  # a refusal changes nothing
        if keep_moments:
            backend.load_state(state)
        if train.batch_size != self.train.batch_size:
            self._plan, self._row = None, 0  # the epoch starts over in batches of the new size
        self.train, self.backend = train, backend

    @property
    def steps_per_epoch(self) -> int:
        return schedule.steps_per_epoch(len(self.data.train_images), self.train)

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.train.epochs

    def step(self, inspect: bool = False) -> dict:
        """One training step; with `inspect`, the Inspector gathers its summaries. Returns the step's record;
        a step that is not finite is undone, located (record["alarm"]) and the weights stay as before it."""
        if self.steps_per_epoch == 0:
            raise LiteNetError(f"{len(self.data.train_images)} training images make no batch of {self.train.batch_size}")
        images, labels, mix, draws, indices = self._next_batch()
        lr = schedule.learning_rate(self.steps, max(self.total_steps, self.steps + 1), self.train)
        before = self.backend.state()
        self.inspector.wanted, self.inspector.batch = inspect, len(labels)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # a NaN is reported, not warned of
            if isinstance(self.backend, NumpyBackend):  # the step's own arrays are inspected
                self.inspector.params = self.backend.params
                stats = self.backend.step(images, labels, lr, mix, observer=self.inspector)
                self.backend.fetch_stats()  # drained: `stats` is this step's
            else:  # another backend trains; the NumPy reference re-runs the batch for the page
                self.backend.train_steps(indices[None], np.array([lr]), **{k: v[None] for k, v in draws.items()})
                stats = {k: v[0] for k, v in self.backend.fetch_stats().items()}
            self.last_batch = (images, labels, mix)
            alarm = nan.check_step(self, stats, before)
        if alarm is not None:
            self.alarm = alarm
            self.inspector.wanted = False
            return {"step": self.steps, "alarm": alarm}
        if inspect and not isinstance(self.backend, NumpyBackend):
            self.probe()
        elif inspect:
            self.inspector.set_shares(stats["path"])
        self.steps += 1
        self._row += 1
        self.curves.step.append(self.steps)
        self.curves.loss.append(float(stats["loss"]))
        self.curves.lr.append(float(lr))
        record = {"step": self.steps, "loss": float(stats["loss"]), "lr": float(lr),
                  "grad_norm": float(stats["grad_norm"]), "epoch": self._epoch}
        if self.steps % EVAL_EVERY == 0:
            record["held_out"] = self.score_held_out()
        return record

    def _next_batch(self):
        """The next step's (augmented images, labels, CutMix targets or None, its draws, its indices): the
        epoch's order and draws as `litenet train` makes them (schedule.epoch_batches, epoch_augments)."""
        if self._plan is None or self._row >= len(self._plan[0]):
            if self._plan is not None:
                self._epoch += 1
            batches = schedule.epoch_batches(len(self.data.train_images), self.train, self._epoch)
            self._plan, self._row = (batches, schedule.epoch_augments(batches, self.train, self._epoch)), 0
        batches, draws = self._plan
        indices, row = batches[self._row], {k: v[self._row] for k, v in draws.items()}
        images = augment.apply(self.data.train_images, indices, padding=self.train.crop_padding,
                               cutout_size=self.train.cutout_size, **row)
        labels = np.asarray(self.data.train_labels[indices], np.int64)
        mix = augment.mixed_targets(labels, row["mixes"]) if "mixes" in row else None
        return images, labels, mix, row, indices

    def score_held_out(self) -> dict:
        """Loss and accuracy of the current weights on the first HELD_OUT test images, added to the curves."""
        images, labels = self.data.test_images[:HELD_OUT], np.asarray(self.data.test_labels[:HELD_OUT], np.int64)
        z = self.backend.logits(images).astype(np.float64)
        loss = loss_and_dlogits(z, labels, self.train.loss, self.train.margin, self.train.label_smoothing)[0]
        point = {"step": self.steps, "loss": float(loss), "accuracy": float(np.mean(z.argmax(axis=1) == labels))}
        self.curves.held_out.append(point)
        return point

    # -- inspection ------------------------------------------------------------------------------------

    def params(self) -> np.ndarray:
        """The current weights (the backend's own array for NumPy; a host copy otherwise)."""
        return self.backend.params if isinstance(self.backend, NumpyBackend) else self.backend.weights()

    def probe(self) -> dict | None:
        """Re-run the last batch (or the next one, before any step) forward and backward with the current
        weights, no update, for the Inspector: what the page shows while paused or after a click."""
        from litenet.train import network

        if self.last_batch is None:
            images, labels, mix, _, _ = self._next_batch()
            self.last_batch = (images, labels, mix)
        images, labels, mix = self.last_batch
        params = self.params()
        tape = network.forward(params, images, self.model)
        _, _, dz = network.loss_and_dlogits(tape.z, labels, self.train.loss, self.train.margin,
                                            self.train.label_smoothing, mix)
        grads = np.zeros_like(params)
        self.inspector.wanted, self.inspector.batch, self.inspector.params = True, len(labels), params
        _, _, joins = network.backward(params, tape, dz, self.model, grads=grads, on_op=self.inspector.backward_op)
        self.inspector.pass_done(tape, dz, grads)
        self.inspector.set_shares([network.path_sums(join) for join in joins])
        return self.inspector.last

    def value(self, op_name: str, param: str, row: int, col: int) -> float:
        """One value of an op's parameter (the picture's cell under the cursor), exactly."""
        from litenet.model import param_views

        op = next((o for o in self.ops if o.name == op_name), None)
        name = op.param(param) if op is not None else None
        if name is None:
            raise LiteNetError(f"no parameter {param!r} in op {op_name!r}")
        tensor = param_views(self.params(), self.model)[name]
        matrix = tensor if tensor.ndim == 2 else tensor[None, :]
        if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
            raise LiteNetError(f"({row}, {col}) is outside {name}'s shape {tuple(matrix.shape)}")
        return float(matrix[row, col])

    def tensor(self, op_name: str, which: str) -> np.ndarray:
        """A whole tensor, on request: an op's parameter ("weight", "bias", "gamma", "beta") or its output on
        the last batch ("output", re-run up to that op). Refused above MAX_TENSOR values."""
        from litenet import forward as fwd
        from litenet.model import param_views

        op = next((o for o in self.ops if o.name == op_name), None)
        if op is None:
            raise LiteNetError(f"no op {op_name!r} in this network")
        if which == "output":
            if self.last_batch is None:
                raise LiteNetError("no batch has run yet: Step once")
            params = self.params()
            value = fwd.run(self.ops, param_views(params, self.model), self.last_batch[0], dtype=params.dtype.type,
                            until=op.name).values[op.name]
        elif op.param(which) is not None:
            value = param_views(self.params(), self.model)[op.param(which)]
        else:
            raise LiteNetError(f"op {op_name!r} has no {which!r}; ask for output or one of its parameters")
        if value.size > MAX_TENSOR:
            raise LiteNetError(f"{op_name}.{which} holds {value.size:,} values; the Studio sends at most {MAX_TENSOR:,}")
        return np.array(value, np.float32)

    # -- saving ------------------------------------------------------------------------------------------

    def save_preset(self, folder: str | Path, name: str, description: str = "", layer_dicts: list[dict] | None = None) -> Path:
        """Write a network (the one built, or the list given: what the canvas shows) and the recipe as
        `<folder>/<name>.toml`, a preset `litenet train --preset` takes."""
        if not layers.NAME.fullmatch(name.replace("-", "_")):
            raise LiteNetError(f"preset name {name!r}: use letters, digits, - and _")
        model = self.model if layer_dicts is None else self.model_of(layer_dicts)
        path = Path(folder) / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, preset_to_toml(name, description, model, self.train))
        if model == self.model:  # the network being trained is now known by that name (its export's folder)
            self.name, self.description = name, description
        return path

    def describe(self) -> dict:
        """The network and recipe as the page shows them after a (re)connect."""
        train = dataclasses.asdict(self.train)
        return {"name": self.name, "description": self.description, "family": self.model.family,
                "layers": layers.to_dicts(graph.layers_of(self.model)), "classes": list(self.data.classes),
                "ops": [{"name": op.name, "kind": op.kind, "inputs": list(op.inputs), "shape": list(op.shape),
                         "params": [p.kind for p in op.params], "layer": i}
                        for i, span in enumerate(graph.layer_spans(graph.layers_of(self.model), self.model.classes,
                                                                   self.model.ln_eps)) for op in span],
                "kinds": {kind: {"doc": spec.doc, "reads": spec.reads,
                                 "settings": [{"name": name, "default": s.default, "type": s.kind.__name__,
                                               "choices": s.choices, "doc": s.doc} for name, s in spec.settings]}
                          for kind, spec in layers.KINDS.items()},
                "check": self.check(layers.to_dicts(graph.layers_of(self.model))),
                "train": {k: train[k] for k in (*SETTINGS, "schedule", "warmup_steps", "loss")},
                "choices": {"optimizer": list(OPTIMIZERS), "augment": ["none", *AUGMENTS, "crop+flip"]},
                "steps": self.steps, "total_steps": self.total_steps, "steps_per_epoch": self.steps_per_epoch,
                "backend": "numpy" if isinstance(self.backend, NumpyBackend) else self.backend_name, "alarm": self.alarm, "curves": self.curves.thinned(),
                "images": {"train": len(self.data.train_images), "test": len(self.data.test_images)}}


def check_layers(layer_dicts: list[dict], classes: int, ln_eps: float) -> dict:
    """Each layer's input and output shapes, its problem, parameters and FLOPs per image; and the totals.
    A layer whose table is wrong (kind, setting) gets its problem too; the others are still judged."""
    parsed, problems = [], {}
    for i, item in enumerate(layer_dicts):
        try:
            parsed.append(layers.from_dict(item, i))
        except layers.LayerError as exc:
            problems[i] = str(exc)
            parsed.append(None)
    rows = [{"given": None, "shape": None, "problem": problems.get(i, ""), "params": 0, "flops": 0}
            for i in range(len(layer_dicts))]
    if not problems and parsed:
        for row, c in zip(rows, layers.check(parsed, classes)):
            row.update(given=c.given and list(c.given), shape=c.shape and list(c.shape), problem=c.problem)
    ok = bool(parsed) and not any(r["problem"] for r in rows)
    if ok:
        try:
            spans = graph.layer_spans(parsed, classes, ln_eps)
        except layers.LayerError as exc:
            rows[exc.position]["problem"], ok = str(exc), False
        else:
            flops = graph.flops_per_image(tuple(op for span in spans for op in span))
            for row, span in zip(rows, spans):
                row["params"] = sum(int(np.prod(p.shape)) for op in span for p in op.params)
                row["flops"] = sum(flops[op.name] for op in span)
    return {"layers": rows, "ok": ok, "params": sum(r["params"] for r in rows), "flops": sum(r["flops"] for r in rows),
            "problem": "" if ok or parsed else "the layer list is empty; start with pixels or patches and end with head"}
