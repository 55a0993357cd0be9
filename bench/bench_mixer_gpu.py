"""Benchmark: LiteNet's CUDA kernels training the Mixer against the same model and recipe in PyTorch,
timed in the same run, precision matched on both sides.

Contenders (NAME[:PRECISION], precision fp32 | tf32 | bf16):
  litenet[:precision[:activations][:one-stream][:64-tiles]]  LiteNet's CUDA backend (left out: fp32, keep),
                     e.g. litenet:bf16:recompute (TrainConfig.activations: the smaller arena, blocks re-run in
                     the backward); one-stream: every launch on one stream (branches "off": the ∂W launches
                     not on the graph's second stream); 64-tiles: the channel products in 64 × 64 tiles
                     (wide "off"; by default they take the wide tiles where geometry.choose_wide does)
  torch-graph        the peer of record (bench/torch_mixer.GraphedTrainer): torch.compile (default mode) of the
                     model and the whole step — augmentation, forward, loss, backward, fused capturable AdamW
                     with the learning rate in a device tensor — in one CUDA graph, replayed with each step's
                     draws copied in; BF16 autocast for bf16, fp32 with TF32 off for fp32
  torch              PyTorch eager, fused AdamW, the same precision rules
  torch-compile      PyTorch eager with the forward under torch.compile
PyTorch's precision left out is tf32. Data and augmentation are on the GPU for every contender.

    python bench/bench_mixer_gpu.py steps --batches 256 1024 --out steps.json
        per-step time (median of CUDA-event-timed runs of 20 steps), peak GPU memory of each (the uint8
        data set aside; LiteNet's: its arena), FLOP floors, each contender's set-up (construction and 3
        warm-up steps: kernel compilation, torch.compile, graph capture), and LiteNet's time over each
        PyTorch contender's at the same batch and precision
    python bench/bench_mixer_gpu.py train [--data DIR] --epochs 40 --runs litenet:bf16 torch:bf16 torch-graph:bf16
        whole training runs on CIFAR-10 with the preset's recipe: test accuracy after every epoch, the
        training time to reach each of --targets (80, 82, 85, 88 %) and the final accuracy — evaluation
        time excluded throughout; one-time costs apart: each contender's set-up (for the peer of record its
        compilation and capture, done before its first step), its usual epoch and what its first epoch
        took beyond it (LiteNet's kernel compilation), with the times to the targets less that
        (one_time_costs), and with the set-up added
Both print a table and write JSON (--out, rewritten as each contender finishes). Every contender
trains on the same batches, flips, crop offsets and cutout / CutMix draws (litenet.train.schedule) from
the same initial weights; PyTorch gets each epoch's draws on the GPU before its steps. A contender that
fails (a capture error, say) is reported in one line and the others go on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from litenet.model import init_params, load_preset, override  # noqa: E402
from litenet.train import schedule  # noqa: E402

PEAK_TFLOPS = {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0}  # H200 SXM dense, NVIDIA's data sheet
PEAK_TBPS = 4.8


def step_flops(model, batch: int) -> float:
    """Multiply-adds ×2 of one training step's products: the forward's, ×3 (∂x and ∂W)."""
    T, d, th, ch, L, C = model.tokens, model.width, model.token_hidden, model.channel_hidden, model.blocks, model.classes
    per_image = T * model.patch ** 2 * 3 * d + L * (2 * th * T * d + 2 * T * d * ch) + d * C
    return 3 * 2 * per_image * batch


KINDS = ("litenet", "torch", "torch-compile", "torch-graph")
PRECISIONS = ("fp32", "tf32", "bf16")


SWITCHES = {"one-stream", "64-tiles"}


def settings(name: str) -> dict:
    """"litenet:bf16:recompute" → {"kind": "litenet", "precision": "bf16", "activations": "recompute",
    "branches": "on", "wide": None};
    "torch-graph:fp32" → {"kind": "torch-graph", "precision": "fp32"}. Precision left out: fp32 for
    LiteNet, tf32 for PyTorch (what its eager peer always ran). A name that fits neither: ValueError."""
    kind, *parts = name.split(":")
    if kind not in KINDS:
        raise ValueError(f"contender {name!r}: expected one of {', '.join(KINDS)}, then :PRECISION")
    precision = parts[0] if parts else ("fp32" if kind == "litenet" else "tf32")
    options = parts[1:]
    if (precision not in PRECISIONS or (kind != "litenet" and options)
            or not set(options) <= {"keep", "recompute"} | SWITCHES or len(set(options) - SWITCHES) > 1):
        raise ValueError(f"contender {name!r}: expected {kind}:PRECISION with PRECISION one of {', '.join(PRECISIONS)}"
                         + (" (then :keep or :recompute, :one-stream, :64-tiles)" if kind == "litenet" else ""))
    if kind == "litenet":
        return {"kind": kind, "precision": precision,
                "activations": next((o for o in options if o not in SWITCHES), "keep"),
                "branches": "off" if "one-stream" in options else "on",
                "wide": False if "64-tiles" in options else None}
    return {"kind": kind, "precision": precision}


def make_contender(name: str, model, train, params, images, labels):
    """An object with LiteNet's train_steps or TorchTrainer's step, and logits(images)."""
    import torch

    from torch_mixer import GraphedTrainer, TorchTrainer
    s = settings(name)
    if s["kind"] == "litenet":
        from litenet.train.gpu_backend import GpuBackend
        backend = GpuBackend(model, override(train, {"precision": s["precision"], "activations": s["activations"]}),
                             params, branches=s["branches"], wide=s["wide"])
        backend.load_dataset(images, labels)
        return backend
    if s["kind"] == "torch-graph":
        return GraphedTrainer(model, train, params, images, labels, precision=s["precision"])
    trainer = TorchTrainer(model, train, params, images, labels, compile=s["kind"] == "torch-compile",
                           precision=s["precision"])
    torch.cuda.synchronize()
    return trainer


def one_line(exc: BaseException) -> str:
    """An error as one line: its type and its message's first line (PyTorch's run to many)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def run_steps(contender, batches, flips, crops, lrs, cutouts=None, mixes=None) -> None:
    """Enqueue the steps (LiteNet: its schedule; PyTorch: one step call each)."""
    if hasattr(contender, "train_steps"):
        contender.train_steps(batches, lrs, flips, crops, cutouts, mixes)
        contender.fetch_stats()
        return
    import torch
    dev = contender.images.device
    # Every draw goes to the GPU once, before the steps, as a PyTorch user with the data on the GPU would
    # do it: a copy from pageable host memory per step makes PyTorch wait for the GPU each time (a
    # stream synchronisation), so the host could not enqueue ahead of it.
    batches, flips, crops = (torch.as_tensor(np.asarray(a), device=dev) for a in (batches, flips, crops.astype(np.int64)))
    cutouts = [None] * len(batches) if cutouts is None else torch.as_tensor(cutouts, device=dev)
    mixes = [None] * len(batches) if mixes is None else torch.as_tensor(mixes.astype(np.int64), device=dev)
    for b, f, c, lr, cut, mix in zip(batches, flips, crops, lrs, cutouts, mixes):
        contender.step(b, f, c, float(lr), cut, mix)


def timed(contender, batches, flips, crops, lrs, cutouts=None, mixes=None) -> float:
    """Seconds for the steps, the GPU drained before and after (CUDA events would not see CuPy's stream)."""
    import torch
    import cupy
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    run_steps(contender, batches, flips, crops, lrs, cutouts, mixes)
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t


def step_row(name: str, model, train, params, images, labels, sched, repeats: int) -> dict:
    """One contender's time per step, memory and set-up (construction and 3 warm-up steps)."""
    import torch
    batches, flips, crops, lrs = sched
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    started = time.perf_counter()
    c = make_contender(name, model, train, params, images, labels)
    timed(c, batches[:3], flips[:3], crops[:3], lrs[:3])  # warm-up (compilation, graph capture)
    setup = time.perf_counter() - started
    times = [timed(c, batches, flips, crops, lrs) / len(batches) for _ in range(repeats)]
    if hasattr(c, "memory_report"):
        memory = c.memory_report()["arena_bytes"]
    else:
        memory = torch.cuda.max_memory_allocated() - base - c.images.nbytes
    return {"ms_per_step": 1e3 * statistics.median(times), "memory_bytes": int(memory), "setup_seconds": round(setup, 3)}


def litenet_over_peers(rows: list[dict]) -> list[dict]:
    """LiteNet's time per step over each PyTorch contender's at the same batch and precision (below 1:
    LiteNet ahead)."""
    timed_rows = [r for r in rows if "ms_per_step" in r]
    return [{"batch": r["batch"], "litenet": r["contender"], "peer": q["contender"],
             "litenet_over_peer": r["ms_per_step"] / q["ms_per_step"]}
            for r in timed_rows if r["contender"].startswith("litenet")
            for q in timed_rows if q["contender"].startswith("torch")
            and (q["batch"], q["precision"]) == (r["batch"], r["precision"])]


def save(out: str | None, result: dict) -> dict:
    """Write the result as JSON to `out` (so far: a run cut short keeps what it measured); returns it."""
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def steps_mode(args) -> dict:
    import torch
    preset = load_preset(args.preset)
    rows = []
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (8192, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, len(images)).astype(np.uint8)
    for batch in args.batches:
        train = override(preset.train, {"batch_size": batch})
        params = init_params(preset.model, train.seed)
        batches = np.stack([rng.permutation(len(images))[:batch] for _ in range(args.steps)])
        flips, crops = rng.random(batches.shape) < 0.5, rng.integers(0, 9, (*batches.shape, 2)).astype(np.int8)
        sched = (batches, flips, crops, np.full(args.steps, train.lr))
        for name in args.contenders:
            row = {"batch": batch, "contender": name, "precision": settings(name)["precision"]}
            try:
                row.update(step_row(name, preset.model, train, params, images, labels, sched, args.repeats))
            except Exception as exc:  # noqa: BLE001 — one contender failing must not lose the others
                row["error"] = one_line(exc)
                print(f"batch {batch:5d}  {name:22s} failed: {row['error']}", flush=True)
                rows.append(row)
                save(args.out, {"rows": rows, "gpu": torch.cuda.get_device_name()})
                continue
            floor_ms = 1e3 * step_flops(preset.model, batch) / (PEAK_TFLOPS[row["precision"]] * 1e12)
            row.update({"flop_floor_ms": floor_ms, "times_floor": row["ms_per_step"] / floor_ms})
            rows.append(row)
            print(f"batch {batch:5d}  {name:22s} {row['ms_per_step']:8.3f} ms/step  "
                  f"{row['memory_bytes'] / 2**20:8.1f} MiB  {row['times_floor']:6.1f}× its {row['precision']} FLOP "
                  f"floor  set-up {row['setup_seconds']:6.1f} s", flush=True)
            save(args.out, {"rows": rows, "gpu": torch.cuda.get_device_name()})
    ratios = litenet_over_peers(rows)
    print("LiteNet's time per step over PyTorch's, same batch and precision (below 1: LiteNet ahead):")
    for r in ratios:
        print(f"batch {r['batch']:5d}  {r['litenet']:22s} / {r['peer']:18s} {r['litenet_over_peer']:6.3f}", flush=True)
    return save(args.out, {"rows": rows, "litenet_over_peers": ratios, "gpu": torch.cuda.get_device_name()})


def one_time_costs(history: list[dict], reached: dict) -> dict:
    """What the first epoch took beyond a usual one — compilation: LiteNet's kernels by NVRTC where
    CuPy's kernel cache is cold (about 19 s on a fresh H200 host), torch.compile's graphs, PyTorch's
    library start-up — and the times to the targets without it, so contenders compare alike whichever
    of them found its caches warm."""
    epochs = np.diff([0.0] + [h["train_seconds"] for h in history])
    if len(epochs) < 2:
        return {}
    usual = float(np.median(epochs[1:]))
    extra = max(0.0, float(epochs[0]) - usual)
    return {"usual_epoch_seconds": round(usual, 3), "first_epoch_extra_seconds": round(extra, 3),
            "seconds_to_targets_without_first_extra": {str(k): round(v - extra, 3) for k, v in reached.items()}}


def race(name: str, model, train, data, params, args) -> dict:
    """One contender's run: its set-up (construction: for the peer of record, compilation and capture),
    then epochs until the schedule ends or --stop-at is reached; an error mid-run keeps the epochs so far."""
    images, labels, test_x, test_y = data
    started = time.perf_counter()
    c = make_contender(name, model, train, params, images, labels)
    setup = time.perf_counter() - started
    spe = schedule.steps_per_epoch(len(images), train)
    history, train_s, reached, out = [], 0.0, {}, {}
    try:
        for epoch in range(train.epochs):
            batches = schedule.epoch_batches(len(images), train, epoch)
            draws = schedule.epoch_augments(batches, train, epoch)  # those switched on
            flips = draws.get("flips", np.zeros(batches.shape, bool))
            crops = draws.get("crops", np.zeros((*batches.shape, 2), np.int8))
            lrs = schedule.learning_rates(epoch * spe, spe, spe * train.epochs, train)
            train_s += timed(c, batches, flips, crops, lrs, draws.get("cutouts"), draws.get("mixes"))
            accuracy = float(np.mean(c.logits(test_x).argmax(1) == test_y))
            history.append({"epoch": epoch + 1, "train_seconds": round(train_s, 3), "test_accuracy": accuracy})
            for target in args.targets:
                if target not in reached and accuracy >= target:
                    reached[target] = round(train_s, 3)
            print(f"{name:18s} epoch {epoch + 1:3d}  {train_s:7.1f} s  test {100 * accuracy:.2f}%", flush=True)
            if args.stop_at is not None and accuracy >= args.stop_at:
                break  # the time to the target is known; the rest of the schedule would not change it
    except Exception as exc:  # noqa: BLE001 — reported; the epochs so far and the other contenders stay
        out["error"] = one_line(exc)
        print(f"{name:18s} failed after {len(history)} epochs: {out['error']}", flush=True)
    return {"history": history, "setup_seconds": round(setup, 3),
            "seconds_to_targets": {str(k): v for k, v in reached.items()},
            "seconds_to_targets_with_setup": {str(k): round(v + setup, 3) for k, v in reached.items()},
            "final_accuracy": history[-1]["test_accuracy"] if history else None,
            "stopped_early": len(history) < train.epochs, **one_time_costs(history, reached), **out}


def race_ratios(results: dict) -> list[dict]:
    """LiteNet's time to each target over each PyTorch contender's, both reached: training time as
    measured, without the one-time costs (first epoch's extra taken off) and with them all (set-up added)."""
    out = []
    for ours, r in results.items():
        for peer, q in results.items():
            if not (ours.startswith("litenet") and peer.startswith("torch")):
                continue
            for target in r.get("seconds_to_targets", {}):
                if target in q.get("seconds_to_targets", {}):
                    def ratio(key, target=target, r=r, q=q):  # None where a run was too short to tell
                        both = target in r.get(key, {}) and target in q.get(key, {})
                        return r[key][target] / q[key][target] if both else None
                    out.append({"target": float(target), "litenet": ours, "peer": peer,
                                "training": ratio("seconds_to_targets"),
                                "without_one_time_costs": ratio("seconds_to_targets_without_first_extra"),
                                "with_one_time_costs": ratio("seconds_to_targets_with_setup")})
    return out


def print_race(results: dict, targets: list[float], ratios: list[dict]) -> None:
    head = " / ".join(f"{100 * t:g}" for t in targets)
    print(f"\nseconds to {head} % — training time; without the first epoch's extra; with the set-up added")
    print(f"{'contender':18s} {'set-up s':>9s} {'1st-epoch extra s':>18s}  {'training':24s} {'without extra':24s} "
          f"{'set-up added':24s} final accuracy")
    for name, r in results.items():
        if "history" not in r:
            print(f"{name:18s} failed: {r['error']}")
            continue

        def to(key, r=r):
            return " / ".join(f"{r[key][str(t)]:.1f}" if str(t) in r.get(key, {}) else "—" for t in targets)
        final = f"{100 * r['final_accuracy']:.2f} %" if r["final_accuracy"] is not None else "—"
        print(f"{name:18s} {r['setup_seconds']:9.1f} {r.get('first_epoch_extra_seconds', 0.0):18.1f}  "
              f"{to('seconds_to_targets'):24s} {to('seconds_to_targets_without_first_extra'):24s} "
              f"{to('seconds_to_targets_with_setup'):24s} {final}" + (f"  [{r['error']}]" if "error" in r else ""))
    for q in ratios:
        without = q["without_one_time_costs"]
        print(f"{100 * q['target']:g} %: {q['litenet']} / {q['peer']}: {q['training']:.3f} training time, "
              f"{'—' if without is None else f'{without:.3f}'} without one-time costs, "
              f"{q['with_one_time_costs']:.3f} with them", flush=True)


def train_mode(args) -> dict:
    import torch

    from litenet.data import open_cifar10
    preset = load_preset(args.preset)
    changes = {"epochs": args.epochs, **dict(item.split("=", 1) for item in args.set)}
    model, train = override(preset.model, changes), override(preset.train, changes)
    ds = open_cifar10(data=args.data, progress=False)
    data = tuple(np.asarray(a) for a in (ds.train.images, ds.train.labels, ds.test.images, ds.test.labels))
    params = init_params(model, train.seed)
    results = {}
    for name in args.runs:
        try:
            results[name] = race(name, model, train, data, params, args)
        except Exception as exc:  # noqa: BLE001 — its set-up failed: reported, the others go on
            results[name] = {"error": one_line(exc)}
            print(f"{name:18s} failed to start: {results[name]['error']}", flush=True)
        torch.cuda.empty_cache()
        ratios = race_ratios(results)
        save(args.out, {"epochs": train.epochs, "targets": args.targets, "runs": results, "litenet_over_peers": ratios,
                        "gpu": torch.cuda.get_device_name()})
    print_race(results, args.targets, ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("steps")
    s.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    s.add_argument("--contenders", nargs="+", metavar="NAME[:PRECISION]",
                   default=["litenet:fp32", "litenet:tf32", "litenet:bf16", "litenet:bf16:recompute", "torch:fp32",
                            "torch:bf16", "torch-graph:fp32", "torch-graph:bf16"])
    s.add_argument("--steps", type=int, default=20)
    s.add_argument("--repeats", type=int, default=5)
    t = sub.add_parser("train")
    t.add_argument("--data", help="CIFAR-10 location (default: litenet data's search order)")
    t.add_argument("--epochs", type=int, default=40)
    t.add_argument("--targets", type=float, nargs="+", default=[0.80, 0.82, 0.85, 0.88])
    t.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="override preset settings (model or train), e.g. augment=none input_scale=4")
    t.add_argument("--runs", nargs="+", default=["litenet:bf16", "torch:bf16", "torch-graph:bf16"],
                   metavar="NAME[:PRECISION]")
    t.add_argument("--stop-at", type=float, metavar="ACC",
                   help="end a contender's run after the first epoch at ≥ ACC test accuracy (e.g. 0.88)")
    for p in (s, t):
        p.add_argument("--preset", default="litenet-mixer")
        p.add_argument("--out")
    args = ap.parse_args()
    for name in args.contenders if args.mode == "steps" else args.runs:
        try:
            settings(name)
        except ValueError as exc:
            ap.error(str(exc))
    steps_mode(args) if args.mode == "steps" else train_mode(args)


if __name__ == "__main__":
    main()
