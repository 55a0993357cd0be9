"""Benchmark: CIFAR-10 conversion time and the feed rate of shuffled float32 batches gathered from the maps.

Usage: .venv/bin/python bench/data_feed.py [--data PATH] [--out bench/results/new/data-feed.md]
The peer for the feed rate is the same gather from an in-RAM copy of the arrays, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from litenet.data import convert, locate_source, open_cifar10  # noqa: E402


def machine() -> str:
    """A short description of this machine, e.g. '2-core AMD EPYC CPU, no GPU'."""
    model = platform.processor() or "unknown"
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = "a GPU" if Path("/dev/nvidia0").exists() else "no GPU"
    return f"{os.cpu_count()}-core {model} CPU, {gpu}"


def epoch(images: np.ndarray, labels: np.ndarray, batch: int, rng: np.random.Generator) -> float:
    """One shuffled pass in batches of `batch`, each gathered and scaled to float32 [0, 1]; return seconds."""
    start = time.perf_counter()
    order = rng.permutation(len(labels))
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        x = images[idx].astype(np.float32)
        np.divide(x, 255, out=x)
        y = labels[idx]
    del x, y
    return time.perf_counter() - start


def feed_rates(ds, batches: list[int], epochs: int) -> list[tuple[int, str, float, float]]:
    """Median epoch time and images/s for each batch size, from the memmap and from an in-RAM copy."""
    stores = {"memmap": (ds.train.images, ds.train.labels),
              "in-RAM copy (peer)": (np.array(ds.train.images), np.array(ds.train.labels))}
    rows = []
    for batch in batches:
        for name, (images, labels) in stores.items():
            rng = np.random.default_rng(0)
            epoch(images, labels, batch, rng)  # warm-up: page cache, allocator
            median = statistics.median(epoch(images, labels, batch, rng) for _ in range(epochs))
            rows.append((batch, name, median, len(labels) / median))
    return rows


def main() -> None:
    """Convert, open, feed; print the report and optionally write it to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="CIFAR-10 source (default: the usual search order, no download)")
    parser.add_argument("--maps", default="data/bench-maps", help="scratch maps folder, rebuilt and then removed")
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per case (after one warm-up)")
    parser.add_argument("--machine", default=machine())
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    source = locate_source(args.data, download=False)
    maps = Path(args.maps)
    shutil.rmtree(maps, ignore_errors=True)
    start = time.perf_counter()
    manifest = convert(source, maps, progress=False)
    convert_s = time.perf_counter() - start
    source_mb = sum(os.path.getsize(source / n) for n in manifest["source"]["sha256"]) / 1e6 \
        if source.is_dir() else os.path.getsize(source) / 1e6
    start = time.perf_counter()
    ds = open_cifar10(maps=maps)
    open_s = time.perf_counter() - start
    start = time.perf_counter()
    open_cifar10(maps=maps, verify=True)
    verify_s = time.perf_counter() - start
    rows = feed_rates(ds, args.batch, args.epochs)
    ram = {batch: rate for batch, name, _, rate in rows if name != "memmap"}

    lines = [
        "# CIFAR-10 data pipeline: conversion and feed rate", "",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d} (UTC)",
        f"- machine: {args.machine}; load average at the start {load:.2f} (the cores are shared)",
        f"- command: `{shlex.join(['.venv/bin/python', *sys.argv])}`",
        f"- source: {source} ({manifest['source']['layout']} layout, {manifest['source']['kind']}, "
        f"{len(manifest['source']['sha256'])} files, {source_mb:.0f} MB); "
        f"train {len(ds.train)}, test {len(ds.test)} images", "",
        "| step | time | rate |", "|---|---:|---:|",
        f"| convert to maps (read, sha256 of sources and maps, NHWC transpose, write, fsync) | {convert_s:.2f} s "
        f"| {source_mb / convert_s:.0f} MB/s |",
        f"| open maps (manifest + file sizes) | {open_s * 1e3:.1f} ms | |",
        f"| open maps with `--verify` (sha256 of every map) | {verify_s:.2f} s | |", "",
        f"Feed: one shuffled epoch of the {len(ds.train)} training images, batches gathered by index and "
        f"converted to float32 / 255; median of {args.epochs} epochs after one warm-up.", "",
        "| batch | store | epoch | images/s | vs in-RAM |", "|---:|---|---:|---:|---:|",
        *(f"| {b} | {name} | {t:.3f} s | {rate:,.0f} | {rate / ram[b]:.2f}x |" for b, name, t, rate in rows), "",
        "The maps were just written, so they sit in the page cache: these are warm-cache rates; a cold "
        "first epoch is bounded by the disk instead.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    shutil.rmtree(maps, ignore_errors=True)


if __name__ == "__main__":
    main()
