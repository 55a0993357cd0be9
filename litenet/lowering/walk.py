"""The walk: a network's op list (litenet.graph.ops_of) lowered to reference calls, forward and in
reverse, exactly as litenet.forward and the NumPy backward (litenet.train.network.backward) walk it.

A training step: the batch gathered and augmented from the training set on the device (region
"input"), each op's forward, the loss and ∂logits, each op's backward in reverse — where a tensor is
read by several ops its gradient parts are summed (region "join", with the path sums a residual's
input reports) — every tensor's ‖g‖², and the optimiser's update, which also advances the step
counter. A forward pass (evaluation, inference) is the same walk without the backward.

Tensors: each op's output is named after the op (tokens-major (T, B, n) for patch tensors, (B, n) for
vectors, "images" (B, 32, 32, 3) uint8 for the input); "∂X" is X's gradient and "∂X@op" the part of it
that op sends back when several ops read X. Parameters and their gradients are views of the flat
"params" and "grads" state tensors (litenet.model.param_layout).
"""

from __future__ import annotations

import numpy as np

from litenet.graph import IMAGES, Op, consumers, ops_of, residuals
from litenet.lowering import reference as ref
from litenet.lowering.program import Call, Program, Ref, Region
from litenet.lowering.stats import StatsLayout
from litenet.model import param_count, param_layout

i32, f32 = np.int32, np.float32
CUTOUT_FILL = 121  # the grey a cutout square is filled with (litenet.train.augment.CUTOUT_FILL)


class Walk:
    """Builds one program over a model's op list at batch B; `prefix` keeps two programs' step tensors
    apart where they share an arena (evaluation's are "eval/…")."""

    def __init__(self, model, batch: int, prefix: str = "", program: Program | None = None):
        self.model, self.ops, self.B, self.prefix = model, ops_of(model), batch, prefix
        self.prog = program or Program({}, [])
        self.by_name = {op.name: op for op in self.ops}
        self.readers = consumers(self.ops)
        self.layout = {p.name: p for p in param_layout(model)}
        self.P = param_count(model)
        self.stats = StatsLayout.of(model)
        self.prog.add("params", (self.P,), life="state", purpose="the parameters, flat (litenet.model.param_layout)")

    # -- tensors --------------------------------------------------------------------------------------

    def name(self, tensor: str) -> str:
        return self.prefix + tensor

    def shape(self, tensor: str) -> tuple[int, ...]:
        """A tensor's shape for B images: (B, 32, 32, 3), (B, n) or tokens-major (T, B, n)."""
        if tensor == IMAGES:
            return (self.B, 32, 32, 3)
        op = self.by_name[tensor]
        return (op.shape[0], self.B, op.shape[1]) if op.tokens else (self.B, *op.shape)

    def act(self, tensor: str) -> Ref:
        dtype = np.uint8 if tensor == IMAGES else np.float32
        return self.prog.add(self.name(tensor), self.shape(tensor), dtype, purpose="an op's output")

    def dact(self, tensor: str, part: str | None = None) -> Ref:
        """∂ of a tensor (float, as its shape), or the part of it op `part` sends back."""
        name = "∂" + tensor + (f"@{part}" if part else "")
        return self.prog.add(self.name(name), self.shape(tensor), purpose="a gradient")

    def cache(self, op: Op, what: str, shape) -> Ref:
        return self.prog.add(self.name(f"{op.name}.{what}"), shape, purpose="kept by the forward for the backward")

    def param(self, op: Op, kind: str) -> Ref:
        return self._flat("params", op.param(kind))

    def grad(self, op: Op, kind: str) -> Ref:
        return self._flat("grads", op.param(kind))

    def _flat(self, tensor: str, name: str) -> Ref:
        p = self.layout[name]
        return Ref(tensor, p.offset, tuple(p.shape), np.dtype(np.float32))

    def state(self, name: str, shape, dtype=np.float32, purpose: str = "") -> Ref:
        return self.prog.add(name, shape, dtype, life="state", purpose=purpose)

    def region(self, name: str, phase: str, ops: tuple[str, ...], calls: list[Call]) -> None:
        self.prog.regions.append(Region(name, phase, ops, calls, list(calls)))

    # -- a forward pass -------------------------------------------------------------------------------

    def forward(self) -> None:
        for op in self.ops:
            self.region(op.name, "forward", (op.name,), ref.FORWARD[op.kind](self, op))

    # -- a training step ------------------------------------------------------------------------------

    def schedule(self, train, capacity: int) -> None:
        """The state a step reads through the step counter: the schedule rows, and the statistics ring."""
        B = self.B
        self.state("grads", (self.P,), purpose="this step's gradient")
        for name in (("velocity",) if train.optimizer == "sgd" else ("m", "v")):
            self.state(name, (self.P,), purpose="the optimiser's state")
        self.state("decay", (self.P,), purpose="each parameter's weight decay (0 where decay = weights spares it)")
        self.state("layout", (len(self.layout) + 1,), np.int32, "offsets of the parameter tensors, then the total")
        self.state("ctr", (2,), np.int32, "the step's row of the schedule; finished-block count")
        self.state("batches", (capacity, B), np.int32, "schedule: image indices of each step")
        self.state("flips", (capacity, B), np.uint8, "schedule: mirror flag of each image")
        self.state("crops", (capacity, B, 2), np.int8, "schedule: crop offsets of each image")
        self.state("cutouts", (capacity, B, 2), np.int8, "schedule: cutout centre of each image")
        self.state("mixes", (capacity if "cutmix" in train.augmentations else 1, B, 5), np.int32,
                   "schedule: CutMix partner and box of each image")
        self.state("lrs", (capacity,), purpose="schedule: learning rate of each step")
        self.state("steps", (capacity,), np.int32, "schedule: the optimiser's 1-based update count")
        self.state("stats", (capacity, self.stats.width), purpose="one statistics row per step until fetched")
        self.prog.add("dataset.images", (1, 32, 32, 3), np.uint8, life="external", purpose="the training set")
        self.prog.add("dataset.labels", (1,), np.uint8, life="external", purpose="its labels")

    def stats_row(self) -> dict:
        return dict(ctr=self.prog.ref("ctr"), stats=self.prog.ref("stats"), stat_width=i32(self.stats.width))

    def images(self, train) -> None:
        """The batch's images, gathered and augmented from the training set."""
        augs, p = train.augmentations, self.prog
        draws = dict(batches=p.ref("batches"), flips=p.ref("flips"), crops=p.ref("crops"), cutouts=p.ref("cutouts"),
                     mixes=p.ref("mixes"), ctr=p.ref("ctr"))
        images = self.act(IMAGES)
        mix = i32("cutmix" in augs)
        self.region("images", "input", (IMAGES,), [Call(
            "images_gather_reference", ref.grid(images.size),
            dict(dataset=p.ref("dataset.images"), **draws, out=images, B=i32(self.B),
                 pad=i32(train.crop_padding if "crop" in augs else 0),
                 cut=i32(train.cutout_size if "cutout" in augs else 0), mix=mix, fill=i32(CUTOUT_FILL)))])

    def labels(self, train) -> None:
        """The batch's labels (and CutMix partners' labels and shares), for the loss."""
        p, mix = self.prog, i32("cutmix" in train.augmentations)
        labels = self.prog.add(self.name("labels"), (self.B,), np.int32, purpose="the batch's labels")
        partners = self.prog.add(self.name("labels.partner"), (self.B,), np.int32, purpose="CutMix partners' labels")
        shares = self.prog.add(self.name("labels.share"), (self.B,), purpose="CutMix partners' shares")
        self.region("labels", "input", ("labels",), [Call(
            "labels_gather_reference", ref.grid(self.B),
            dict(dataset_labels=p.ref("dataset.labels"), batches=p.ref("batches"), mixes=p.ref("mixes"),
                 ctr=p.ref("ctr"), labels=labels, partners=partners, shares=shares, B=i32(self.B), mix=mix))])

    def loss(self, train) -> None:
        """The batch loss into the statistics row, and ∂L/∂logits."""
        last = self.ops[-1]
        z, dz, C = self.act(last.name), self.dact(last.name), last.shape[-1]
        per_sample = self.prog.add(self.name("loss.per_sample"), (self.B,), purpose="each image's loss")
        labels = self.prog.ref(self.name("labels"))
        shape = dict(B=i32(self.B), C=i32(C))
        if train.loss == "margin":
            margin = dict(labels=labels, **shape, margin=f32(train.margin))
            calls = [Call("margin_loss_forward_reference", ref.grid(self.B), dict(z=z, per_sample=per_sample, **margin)),
                     Call("margin_loss_backward_reference", ref.grid(dz.size), dict(z=z, dz=dz, **margin))]
        else:
            targets = dict(labels=labels, partners=self.prog.ref(self.name("labels.partner")),
                           shares=self.prog.ref(self.name("labels.share")), **shape,
                           smoothing=f32(train.label_smoothing))
            calls = [Call("cross_entropy_forward_reference", ref.grid(self.B),
                          dict(z=z, per_sample=per_sample, **targets), terms={"per_sample": 2 * C}),
                     Call("cross_entropy_backward_reference", ref.grid(dz.size), dict(z=z, dz=dz, **targets),
                          terms={"dz": 2 * C})]
        calls.insert(1, Call("loss_mean_reference", 1, dict(per_sample=per_sample, B=i32(self.B), **self.stats_row()),
                             terms={"stats": self.B}))
        self.region("loss", "loss", (last.name,), calls)

    def backward(self) -> None:
        """Each op's backward in reverse order, as litenet.train.network.backward: the parts of a tensor's
        ∂ summed where several ops read it, and the path sums of a residual's input recorded there."""
        requires = {IMAGES: False}
        for op in self.ops:
            requires[op.name] = bool(op.params) or any(requires[n] for n in op.inputs)
        pending: dict[str, list[Ref]] = {self.ops[-1].name: [self.prog.ref(self.name("∂" + self.ops[-1].name))]}
        identity: dict[str, Ref] = {}  # a residual's input → the part its identity path brings
        slot = {r.inputs[0]: self.stats.path + 3 * j for j, r in enumerate(residuals(self.model))}
        for op in reversed(self.ops):
            if op.name not in pending:
                continue
            parts = pending.pop(op.name)
            dy = self._join(op.name, parts, identity.pop(op.name, None), slot.get(op.name))
            dins = []
            for name in op.inputs:
                if not requires[name]:
                    dins.append(None)
                elif op.kind == "residual":
                    dins.append(dy)  # the sum passes ∂ on to both summands unchanged: no kernel
                else:
                    readers = {r.name for r in self.readers[name]}
                    dins.append(self.dact(name, op.name if len(readers) > 1 else None))
            if op.kind == "residual":
                identity[op.inputs[0]] = dy
            elif op.params or any(d is not None for d in dins):  # the input ops' ∂images: only when asked for
                self.region(op.name, "backward", (op.name,), ref.BACKWARD[op.kind](self, op, dy, dins))
            for name, d in zip(op.inputs, dins):
                if d is not None:
                    pending.setdefault(name, []).append(d)

    def _join(self, name: str, parts: list[Ref], ds: Ref | None, slot: int | None) -> Ref:
        """∂name from its parts (one: as is; more: summed, region "join"), with the path sums where
        `name` is a residual's input (`ds` the identity path's part, the others the branch's)."""
        if len(parts) == 1:
            return parts[0]
        total, calls = self.dact(name), []
        acc = parts[0]
        for k, part in enumerate(parts[1:]):
            out = total if k == len(parts) - 2 else self.prog.add(self.name(f"∂{name}#{k}"), total.shape)
            calls.append(ref.gradient_sum(acc, part, out))
            acc = out
        if ds is not None:
            main = [p for p in parts if p != ds]
            dm = main[0] if len(main) == 1 else None
            if dm is None:  # several branch parts: their own sum first
                dm = self.prog.add(self.name(f"∂{name}#main"), total.shape)
                calls.insert(0, ref.gradient_sum(main[0], main[1], dm))
            calls.append(Call("path_sums_reference", 1, dict(ds=ds, dm=dm, n=i32(total.size), **self.stats_row(),
                                                            slot=i32(slot)), terms={"stats": total.size}))
        self.region(f"∂{name}", "join", (name,), calls)
        return total

    def norm_and_update(self, train) -> None:
        """‖g‖² per tensor, then the clip rule and the optimiser (which advance the step counter)."""
        p, T = self.prog, len(self.layout)
        first = i32(self.stats.grad_sq)
        self.region("‖g‖²", "norm", (), [Call(
            "grad_norm_sq_reference", ref.grid(T),
            dict(grads=p.ref("grads"), offsets=p.ref("layout"), T=i32(T), **self.stats_row(), first=first))])
        common = dict(params=p.ref("params"), grads=p.ref("grads"), decay=p.ref("decay"), lrs=p.ref("lrs"),
                      **self.stats_row(), first=first, n=i32(self.P), T=i32(T), threshold=f32(train.clip_threshold),
                      clip_norm=f32(train.clip_norm))
        if train.optimizer == "sgd":
            update = Call("sgd_update_reference", ref.grid(self.P),
                          dict(velocity=p.ref("velocity"), momentum=f32(train.momentum), **common))
        else:
            update = Call("adamw_update_reference", ref.grid(self.P),
                          dict(m=p.ref("m"), v=p.ref("v"), steps=p.ref("steps"), beta1=f32(train.beta1),
                               beta2=f32(train.beta2), eps=f32(train.adam_eps), **common))
        self.region(train.optimizer, "update", (), [update, Call("step_advance_reference", 1, dict(ctr=p.ref("ctr")))])


def training_program(model, train, batch: int, capacity: int) -> Program:
    """The reference tier's training step of `model` at batch `batch` (the schedule holds `capacity` steps)."""
    w = Walk(model, batch)
    w.schedule(train, capacity)
    w.images(train)
    w.forward()
    w.labels(train)
    w.loss(train)
    w.backward()
    w.norm_and_update(train)
    w.prog.labels.update(batch=batch, tier="reference")
    return w.prog


def forward_program(model, batch: int, prefix: str = "eval/") -> Program:
    """The reference tier's forward pass of `model` for `batch` images uploaded to `prefix + "images"`."""
    w = Walk(model, batch, prefix)
    w.act(IMAGES)
    w.forward()
    w.prog.labels.update(batch=batch, tier="reference")
    return w.prog
