"""`litenet data`: prepare the CIFAR-10 memory maps and print where they came from and where they are."""

from __future__ import annotations

import argparse

from litenet.data.dataset import open_cifar10
from litenet.errors import LiteNetError, debugging, report

DESCRIPTION = "Find (or download) CIFAR-10 and convert it once into memory-mapped uint8 arrays plus a manifest."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `litenet data` options to a (sub)parser."""
    parser.add_argument("--data", metavar="PATH",
                        help="folder or .tar.gz holding CIFAR-10 (default: $LITENET_DATA, ./data, "
                             "../shared/data, else download)")
    parser.add_argument("--maps", metavar="DIR",
                        help="where the maps go (default: $LITENET_MAPS or ./data/cifar10-maps)")
    parser.add_argument("--force", action="store_true", help="rebuild the maps even if they exist")
    parser.add_argument("--verify", action="store_true",
                        help="check every map against the sha256 in its manifest (reads all ~180 MB)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="accept a source holding only some training batches (e.g. data_batch_1 + test_batch)")
    parser.add_argument("--no-download", action="store_true", help="fail instead of downloading when no data is found")


def run(args: argparse.Namespace) -> int:
    """Prepare the maps and print a summary; user mistakes raise LiteNetError for the dispatcher to print."""
    ds = open_cifar10(data=args.data, maps=args.maps, download=not args.no_download, progress=True,
                      allow_partial=args.allow_partial, force=args.force, verify=args.verify)
    m, src = ds.manifest, ds.manifest["source"]
    batches = ", ".join(map(str, m["train_batches"]))
    print(f"source   {src['path']} ({src['layout']} layout, {src['kind']})")
    print(f"train    {len(ds.train):>6} images (batches {batches}){'  PARTIAL' if m['partial'] else ''}")
    print(f"test     {len(ds.test):>6} images")
    if ds.converted:
        print(f"convert  {m['convert_seconds']:.1f} s")
    else:
        print(f"convert  not needed: maps built {m['created']} (--force rebuilds them)")
    if args.verify:
        print("verify   every map matches its sha256")
    print(f"maps     {ds.path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (`python -m litenet.data`), printing user mistakes as one line."""
    parser = argparse.ArgumentParser(prog="litenet data", description=DESCRIPTION)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except (LiteNetError, OSError) as exc:
        if debugging():
            raise
        return report("litenet data", exc)
