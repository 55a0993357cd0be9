"""One table of LiteNet's CUDA training step time against PyTorch's CUDA-graph replay of the same step.

`make bench-steps-gpu` (about 2–4 minutes on an H200, plus the compilation of the Mixer's peer of record).

Rows: the Mixer (litenet-mixer preset) and litenet-base's MLP shape (full 3072-value embedding,
2 blocks, cross-entropy, SGD with momentum) at widths 256, 1024 and 2048 with hidden = 2 × width
(the preset's 256 → 512 ratio), each at batch 256 and 1024, in fp32 and in the faster of TF32 and
BF16 for LiteNet (both are timed; the table shows the faster, the JSON both).

Contenders, on the same GPU, same model, same initial weights, same precision:
  LiteNet   its CUDA backend (`precision` fp32 | tf32 | bf16), steps replayed from CUDA graphs; where
            the step takes wide tiles (geometry.choose_wide), also without them, for what they gain
  PyTorch graph
            the same eager training step captured once in a CUDA graph and replayed (bench/gpu_torch_twin.py
            for the MLP; bench/torch_mixer.py's trainer for the Mixer, with capturable fused AdamW and
            the batch read through a device step counter)
  PyTorch compiled graph (the Mixer's rows: its peer of record, bench/torch_mixer.py's GraphedTrainer)
            torch.compile of the model and the whole step — augmentation, forward, loss, backward, fused
            capturable AdamW with the learning rate in a device tensor — in one CUDA graph; each step
            copies its batch, flips, crops and learning rate into the graph's inputs and replays it.
            Its one-time cost (compilation, warm-up, capture) is in the JSON (setup_seconds)
PyTorch's precision: fp32 with TF32 off, tf32 with TF32 on, bf16 under torch.autocast(bfloat16) (TF32 on
for what autocast leaves in fp32). "LiteNet ahead": faster than every PyTorch form the row times.
Time per step: median over repeats of (CUDA-event time of a run of steps) / steps, after warm-up.

Floor of a cell: the larger of (the step's matrix-product FLOPs at the H200's dense peak for the
precision: fp32 67, TF32 494, BF16 989 TFLOP/s) and (its unavoidable bytes at 4.8 TB/s: the batch's
uint8 images read once, and the optimiser's per-parameter traffic — SGD with momentum w, v, g read
and w, v, g written, 24 bytes; AdamW w, m, v, g read and w, m, v, g written, 32 bytes). Activations
are not counted: a fused enough step need not write them.

    python bench/bench_steps_gpu.py --out bench/results/new/gpu-steps.md   (+ .json beside it)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_gpu import cupy_timer, median_ms, torch_timer  # noqa: E402 (the timing of make bench-gpu)

from litenet.model import init_params, load_preset, override, param_count  # noqa: E402 (after the path)

PEAK_TFLOPS = {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0}  # H200 SXM dense, NVIDIA's data sheet
PEAK_TBPS = 4.8
WIDTHS = (256, 1024, 2048)
PRECISIONS = ("fp32", "tf32", "bf16")
BATCHES = (256, 1024)
DATASET = 8192  # random uint8 images on the GPU, the same for every contender
NO_WIDE = "-no-wide"  # suffix of LiteNet's step without wide tiles (geometry.choose_wide), where it has some
ONE_STREAM = "-one-stream"  # suffix of LiteNet's step with every launch on one stream (--one-stream)
OTHER_LABELS = {"tf32": "TF32", "bf16": "BF16", "fp32" + NO_WIDE: "without wide tiles",
                "bf16" + NO_WIDE: "BF16 without wide tiles", "fp32" + ONE_STREAM: "on one stream",
                "tf32" + ONE_STREAM: "TF32 on one stream", "bf16" + ONE_STREAM: "BF16 on one stream"}


# -- the cells' models and floors ------------------------------------------------------------------

def models(widths) -> list[tuple[str, object, object]]:
    """(row name, model, TrainConfig at the preset's recipe) of every row."""
    mixer, base = load_preset("litenet-mixer"), load_preset("litenet-base")
    rows = [("litenet-mixer", mixer.model, mixer.train)]
    for w in widths:
        model = dataclasses.replace(base.model, width=w, hidden=2 * w)
        rows.append((f"litenet-base shape, width {w} (hidden {2 * w})", model, base.train))
    return rows


def step_flops(model, batch: int) -> float:
    """FLOPs (2 per multiply-add) of a training step's matrix products: forward, ∂input, ∂weight."""
    if model.family == "mixer":
        from bench_mixer_gpu import step_flops as mixer_flops
        return mixer_flops(model, batch)
    from bench_gpu import step_cost
    return step_cost(model, batch)[0]


def step_bytes(model, train, batch: int) -> float:
    """Unavoidable bytes of a step: the batch's images once, the optimiser's traffic per parameter."""
    per_param = 32 if train.optimizer == "adamw" else 24
    return batch * 3072 + per_param * param_count(model)


def floor_ms(model, train, batch: int, precision: str) -> dict:
    flops, least = step_flops(model, batch), step_bytes(model, train, batch)
    flop_ms, byte_ms = flops / (PEAK_TFLOPS[precision] * 1e9), least / (PEAK_TBPS * 1e9)
    return {"flops": flops, "bytes": least, "flop_ms": flop_ms, "byte_ms": byte_ms, "ms": max(flop_ms, byte_ms),
            "bound": "FLOP" if flop_ms >= byte_ms else "bytes"}


def schedule(rng, model, train, batch: int, n: int):
    """n steps of batch indices, flips, crop offsets and learning rates (the preset's peak lr)."""
    batches = np.stack([rng.permutation(DATASET)[:batch] for _ in range(n)])
    flips = rng.random(batches.shape) < 0.5
    pad = train.crop_padding if model.family == "mixer" and "crop" in train.augmentations else 0
    crops = rng.integers(0, 2 * pad + 1, (*batches.shape, 2)).astype(np.int8)
    return batches, flips, crops, np.full(n, train.lr, np.float32)


def bench_litenet(*args) -> dict:
    import cupy
    try:
        return _litenet_ms(*args)
    finally:  # the backend's arena is gone with _litenet_ms's frame: give its blocks back
        cupy.get_default_memory_pool().free_all_blocks()


def _litenet_ms(model, train, params, images, labels, sched, precision, steps, repeats, wide=None,
                branches="on") -> dict:
    """`wide`: the MLP's wide BF16 tiles as geometry.choose_wide picks them (None) or none (False);
    `branches`: the backward's ∂W launches on the graph's second stream ("on") or every launch on one."""
    import cupy
    train = override(train, {"precision": precision})
    batches, flips, crops, lrs = sched
    if model.family == "mixer":
        from litenet.train.gpu_backend import GpuBackend
        backend = GpuBackend(model, train, params, branches=branches)

        def extra(rows):
            return {"crops": crops[rows]}
    else:
        from litenet.train.gpu_backend import GpuBackend
        backend = GpuBackend(model, train, params, wide=wide, branches=branches)

        def extra(rows):
            return {}
    backend.load_dataset(images, labels)
    warm = slice(0, 2 * steps)
    backend.train_steps(batches[warm], lrs[warm], flips=flips[warm], **extra(warm))  # modules, graph capture
    loss = backend.fetch_stats()["loss"]
    cursor = [0]

    def run():
        i = cursor[0] % (len(batches) - steps)
        rows = slice(i, i + steps)
        backend.train_steps(batches[rows], lrs[rows], flips=flips[rows], **extra(rows))
        cursor[0] += steps
    ms = median_ms(run, steps, repeats, cupy_timer(cupy, backend.dev.stream), before=backend.fetch_stats)
    out = {"ms": ms, "arena_bytes": backend.memory_report()["arena_bytes"], "warmup_last_loss": float(loss[-1])}
    if backend.geometry is not None:  # the MLP's tile geometry (the Mixer's products split by one rule)
        out["plan"] = backend.plan
        out["wide"] = [k for k, v in backend.geometry.gemms.items() if v.wide]
    return out


def torch_precision(precision: str):
    """Set PyTorch's matmul precision flags; returns the autocast context a step runs under."""
    from torch_mixer import autocast, set_matmul_precision
    set_matmul_precision(precision)
    return autocast(precision)


class MixerStep:
    """bench/torch_mixer.py's TorchTrainer step with the batch, flips and crops read through a device
    step counter (no host input per step, like LiteNet's), and AdamW fused and capturable."""

    def __init__(self, model, train, params, images, labels, sched, precision):
        import torch
        from torch_mixer import TorchTrainer, adamw
        self.trainer = TorchTrainer(model, train, params, images, labels, precision=precision)
        self.trainer.opt = adamw(self.trainer.net, train, train.lr, capturable=True)
        batches, flips, crops, lrs = sched
        dev = self.trainer.images.device
        self.batches = torch.tensor(batches.astype(np.int64), device=dev)
        self.flips = torch.tensor(flips, device=dev)
        self.crops = torch.tensor(crops.astype(np.int64), device=dev)
        self.lr = float(lrs[0])
        self.pos = torch.zeros(1, dtype=torch.int64, device=dev)

    def step(self) -> None:
        pos = self.pos % len(self.batches)
        index, flips, crops = (t.index_select(0, pos)[0] for t in (self.batches, self.flips, self.crops))
        self.trainer.step(index, flips, crops, lr=self.lr)
        self.pos += 1


def _with_clean_pool(measure, *args) -> dict:
    """measure(*args) with PyTorch's peak-memory counter reset and its cache emptied before and after (the
    model, its graph and its pool are gone with measure's frame)."""
    import torch
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        return measure(*args)
    finally:
        torch.cuda.empty_cache()


def bench_torch(*args) -> dict:
    return _with_clean_pool(_torch_ms, *args)


def _torch_ms(model, train, params, images, labels, sched, precision, steps, repeats) -> dict:
    import torch
    from gpu_torch_twin import GraphedStep, TorchTwin

    batches, flips, _, lrs = sched
    if model.family == "mixer":
        twin = MixerStep(model, train, params, images, labels, sched, precision)
    else:
        twin = TorchTwin(model, train, params, images, labels, batches, lrs, flips)
    autocast = torch_precision(precision)
    with autocast:
        graphed = GraphedStep(twin)  # warm-up on a side stream, then the capture, both under autocast
    for _ in range(3):
        graphed()

    def run():
        for _ in range(steps):
            graphed()
    ms = median_ms(run, steps, repeats, torch_timer(torch))
    torch.cuda.synchronize()
    return {"ms": ms, "peak_bytes": int(torch.cuda.max_memory_allocated())}


def bench_peer(*args) -> dict:
    return _with_clean_pool(_peer_ms, *args)


def _peer_ms(model, train, params, images, labels, sched, precision, steps, repeats) -> dict:
    """The Mixer's peer of record (torch_mixer.GraphedTrainer): each step copies its draws from the
    schedule's device tensors into the graph's inputs and replays the graph."""
    import torch
    from torch_mixer import GraphedTrainer
    peer = GraphedTrainer(model, train, params, images, labels, precision=precision)
    dev = peer.images.device
    batches, flips, crops = (torch.as_tensor(a, device=dev) for a in (sched[0], sched[1], sched[2].astype(np.int64)))
    lrs, cursor = [float(lr) for lr in sched[3]], [0]

    def run():
        for _ in range(steps):
            i = cursor[0] % len(lrs)
            peer.step(batches[i], flips[i], crops[i], lrs[i])
            cursor[0] += 1
    run()  # the first replays
    ms = median_ms(run, steps, repeats, torch_timer(torch))
    torch.cuda.synchronize()
    return {"ms": ms, "peak_bytes": int(torch.cuda.max_memory_allocated()),
            "setup_seconds": round(peer.setup_seconds, 2)}


def attempt(fn, *args) -> dict:
    """A cell's measurement, or its error: one failing contender must not lose the whole table."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 — reported in the table and the JSON
        traceback.print_exc()
        message = str(exc).strip().splitlines()
        return {"error": f"{type(exc).__name__}: {message[0] if message else ''}"}


# -- the run ----------------------------------------------------------------------------------------

def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the table (Markdown) here, and every number as .json beside it")
    parser.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS))
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    rows = parser.add_mutually_exclusive_group()
    rows.add_argument("--no-mixer", action="store_true", help="the MLP rows only")
    rows.add_argument("--mixer-only", action="store_true", help="the Mixer's rows only")
    parser.add_argument("--no-peer", action="store_true",
                        help="without the Mixer's peer of record (torch.compile in one CUDA graph of the whole step)")
    parser.add_argument("--litenet-only", action="store_true",
                        help="LiteNet's times alone (no PyTorch, no step without wide tiles): kernel variants")
    parser.add_argument("--steps", type=int, default=24,
                        help="steps per timed run (a multiple of both backends' steps per graph, 8 and 4)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--one-stream", action="store_true",
                        help="also time LiteNet with every launch on one stream: what the second stream gains")
    parser.add_argument("--precisions", nargs="*", default=list(PRECISIONS), choices=PRECISIONS,
                        help="LiteNet's precisions to time (fewer: quicker kernel variants)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (DATASET, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, DATASET).astype(np.uint8)
    cells = []
    rows = models(args.widths)
    for name, model, preset_train in rows[:1] if args.mixer_only else rows[1 if args.no_mixer else 0:]:
        for batch in args.batches:
            train = override(preset_train, {"batch_size": batch})
            params = init_params(model, train.seed)
            sched = schedule(rng, model, train, batch, 4 * args.steps)
            run = (model, train, params, images, labels, sched)
            litenet = {p: attempt(bench_litenet, *run, p, args.steps, args.repeats) for p in args.precisions}
            for p in ("fp32", "bf16"):  # what the wide tiles gain, in the same run
                if litenet.get(p, {}).get("wide") and not args.litenet_only:
                    litenet[p + NO_WIDE] = attempt(bench_litenet, *run, p, args.steps, args.repeats, False)
            for p in args.precisions if args.one_stream else ():
                litenet[p + ONE_STREAM] = attempt(bench_litenet, *run, p, args.steps, args.repeats, None, "off")
            timed = [p for p in ("tf32", "bf16") if "ms" in litenet.get(p, {})]
            fastest = min(timed, key=lambda p: litenet[p]["ms"]) if timed else "bf16"
            for precision in [p for p in ("fp32", fastest) if p in litenet]:
                cell = {"model": name, "family": model.family, "width": model.width, "batch": batch,
                        "precision": precision, "litenet": litenet[precision],
                        "torch_graph": ({"error": "not run (--litenet-only)"} if args.litenet_only
                                        else attempt(bench_torch, *run, precision, args.steps, args.repeats)),
                        "torch_peer": ({"error": "not run (--litenet-only)"} if args.litenet_only
                                       else attempt(bench_peer, *run, precision, args.steps, args.repeats))
                        if model.family == "mixer" and not args.no_peer else {},
                        "floor": floor_ms(model, train, batch, precision)}
                others = [p for p in ("tf32", "bf16") if p != precision and p in litenet] if precision != "fp32" else []
                no_wide = ("fp32" if precision == "fp32" else "bf16") + NO_WIDE  # TF32 has no wide tiles: BF16's
                others += [no_wide] if no_wide in litenet else []
                others += [precision + ONE_STREAM] if precision + ONE_STREAM in litenet else []
                if others:
                    cell["litenet_other"] = {p: litenet[p] for p in others}
                cells.append(cell)
                print(line(cell), flush=True)
                save(args.out, result(cells, started, args))  # so far: a run cut short keeps its cells
    table = save(args.out, result(cells, started, args))
    print(table)


def result(cells: list, started: float, args) -> dict:
    import cupy
    import torch
    return {"gpu": torch.cuda.get_device_name(), "cupy": cupy.__version__, "torch": torch.__version__,
            "peak_tflops": PEAK_TFLOPS, "peak_tbps": PEAK_TBPS, "steps": args.steps, "repeats": args.repeats,
            "seconds": round(time.perf_counter() - started, 1), "cells": cells}


def save(out: str | None, result: dict) -> str:
    """Write the table (Markdown) to `out` and the numbers as JSON beside it; returns the table."""
    table = render(result)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(table + "\n", encoding="utf-8")
        path.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return table


def _ms(m: dict) -> str:
    return f"{m['ms']:.3f}" if "ms" in m else ("error" if "error" in m else "—")


def _times(m: dict, floor: dict) -> str:
    return f"{m['ms'] / floor['ms']:.1f}" if "ms" in m else "—"


def peers(cell: dict) -> dict:
    """The PyTorch forms the cell timed: name → measurement (the Mixer's rows have the peer of record too)."""
    return {who: cell[who] for who in ("torch_graph", "torch_peer") if who in cell and "ms" in cell[who]}


def line(cell: dict) -> str:
    def ms(m):
        return f"{_ms(m)} ms" if "ms" in m else _ms(m)
    peer = f", compiled graph {ms(cell['torch_peer'])}" if cell.get("torch_peer") else ""
    return (f"{cell['model']:38s} B={cell['batch']:5d} {cell['precision']}: LiteNet {ms(cell['litenet'])}, "
            f"PyTorch graph {ms(cell['torch_graph'])}{peer}, floor {cell['floor']['ms']:.3f} ms ({cell['floor']['bound']})")


def render(result: dict) -> str:
    lines = [(f"Per-step time on {result['gpu']} (CuPy {result['cupy']}, PyTorch {result['torch']}): median of "
              f"{result['repeats']} CUDA-event timings of {result['steps']} steps; whole run {result['seconds']:.0f} s."),
             "",
             ("| model | batch | precision | LiteNet ms | PyTorch graph ms | PyTorch compiled graph ms "
              "| PyTorch / LiteNet | LiteNet ahead | floor ms (FLOP / bytes) | LiteNet × floor | PyTorch × floor |"),
             "|---|---:|---|---:|---:|---:|---:|:-:|---:|---:|---:|"]
    for c in result["cells"]:
        ln, fl, timed = c["litenet"], c["floor"], peers(c)
        best = min((m["ms"] for m in timed.values()), default=None)
        both = "ms" in ln and best is not None
        ratio = " / ".join(f"{m['ms'] / ln['ms']:.2f}" for m in timed.values()) if "ms" in ln and timed else "—"
        ahead = ("yes" if best > ln["ms"] else "**no**") if both else "—"
        if both and any("error" in c.get(who, {}) for who in ("torch_graph", "torch_peer")):
            ahead += " †"  # of the forms timed: one failed
        precision = c["precision"].upper() if c["precision"] != "fp32" else "fp32"
        if "litenet_other" in c:
            precision += " (" + "; ".join(f"{OTHER_LABELS[k]} {_ms(m)}" for k, m in c["litenet_other"].items()) + ")"
        lines.append(f"| {c['model']} | {c['batch']} | {precision} | {_ms(ln)} | {_ms(c['torch_graph'])} "
                     f"| {_ms(c.get('torch_peer', {}))} | {ratio} | {ahead} "
                     f"| **{fl['ms']:.3f}** ({fl['flop_ms']:.3f} / {fl['byte_ms']:.4f}) | {_times(ln, fl)} "
                     f"| {' / '.join(_times(m, fl) for m in timed.values()) or '—'} |")
    errors = [(c["model"], c["batch"], c["precision"], who, c[who]["error"])
              for c in result["cells"] for who in ("litenet", "torch_graph", "torch_peer")
              if "error" in c.get(who, {})]
    setups = [f"{c['model']}, batch {c['batch']}, {c['precision']}: {c['torch_peer']['setup_seconds']:.1f} s"
              for c in result["cells"] if "setup_seconds" in c.get("torch_peer", {})]
    lines += ["", ("PyTorch graph: the eager step captured in one CUDA graph. PyTorch compiled graph (the Mixer's "
                   "peer of record): torch.compile of the model and the whole step in one CUDA graph, each step's "
                   "draws copied in. PyTorch / LiteNet and PyTorch × floor: for each PyTorch form the row timed, in "
                   "that order; LiteNet ahead: faster than all of them († of those timed: another failed, see Errors)."),
              "", ("Floor: the larger of the step's matrix-product FLOPs at the dense peak of its precision "
                   "(fp32 67, TF32 494, BF16 989 TFLOP/s) and its unavoidable bytes (images once; optimiser state "
                   "24 B/parameter for SGD with momentum, 32 for AdamW) at 4.8 TB/s. The precision column names, "
                   "in brackets, LiteNet's time in the other tensor-core precision (the row shows the faster) and, "
                   "where the step takes wide (fp32 256 × 128, BF16 128 × 128) tiles for its large products, "
                   "its time without them "
                   "(geometry.choose_wide; 64-row tiles, or tall ones where choose_tall picks them).")]
    if setups:
        lines += ["", "The peer of record's one-time cost (compilation, warm-up, capture): " + "; ".join(setups) + "."]
    if errors:
        lines += ["", "Errors:"] + [f"- {m}, batch {b}, {p}, {who}: {e}" for m, b, p, who, e in errors]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
