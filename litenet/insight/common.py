"""What the insight commands share: the default model folder, loading it, and opening CIFAR-10."""

from __future__ import annotations

from pathlib import Path

from litenet.data import CLASS_NAMES
from litenet.paths import check_reachable, make_folder
from litenet.resources import models_dir

RUNS_DIR = Path("runs")  # untracked in a checkout (.gitignore), as litenet train's default


def check_steps(steps: int) -> None:
    """Refuse a --steps the short runs cannot take, before the data is opened."""
    from litenet.errors import UsageError
    from litenet.limits import MAX_STEPS

    if not 1 <= steps <= MAX_STEPS:
        raise UsageError(f"--steps {steps}: give 1 … {MAX_STEPS:,} steps")


def add_model_argument(parser) -> None:
    parser.add_argument("--model", help="trained model folder (default: your newest finished run under runs/, "
                                        "else the best shipped model; the one used is named on stderr)")


def add_data_arguments(parser) -> None:
    parser.add_argument("--data", help="CIFAR-10 folder or archive (default: LITENET_DATA, ./data, ../shared/data, download)")
    parser.add_argument("--maps", help="folder of the converted memory maps (default ./data/cifar10-maps)")


def load_trained(folder: str | None, command: str | None = None):
    """(params, model config, train config, class names, folder) of a trained model folder: `folder`, else
    the default model_choice.py picks; given the command's name, one line on stderr says which was used."""
    import sys

    from litenet.errors import LiteNetError
    from litenet.runtime.model_choice import choose_model
    from litenet.weights import CONFIG_FILE, load_model

    choice = choose_model(folder, needs="weights")
    path = choice.path
    if not (path / CONFIG_FILE).is_file():  # load_model's own message names export's --weights too
        check_reachable(path)  # a symlink loop or an unreadable folder is not "no such folder"
        what = "no such folder" if not path.exists() else f"no {CONFIG_FILE}"
        raise LiteNetError(f"{path}: {what}; point --model at a folder written by litenet train "
                           "(default: your newest finished run under runs/, else the best shipped model)")
    if command and folder is None:  # a model the user named is not repeated back
        print(choice.line(f"litenet {command}"), file=sys.stderr, flush=True)
    params, model, train, doc = load_model(path)
    classes = list(doc.get("classes") or CLASS_NAMES)
    return params, model, train, classes, path


def output_folder(requested: str | None, model_folder: Path, command: str) -> Path:
    """Where `command` (eval, explain) writes: --out; else beside a model of the user's (eval: its folder,
    explain: its explain/ subfolder); but never into LiteNet's own shipped models/ unless --out says so:
    runs/<command>/<model name>/ then."""
    if requested:
        return Path(requested)
    try:
        shipped = Path(model_folder).resolve().is_relative_to(models_dir().resolve())
    except FileNotFoundError:  # no bundled models/ at all
        shipped = False
    if shipped:
        return RUNS_DIR / command / Path(model_folder).name
    return Path(model_folder) if command == "eval" else Path(model_folder) / command


def open_data(args):
    """CIFAR-10 as the data command left it (converting it first if needed)."""
    from litenet.data import open_cifar10

    return open_cifar10(data=getattr(args, "data", None), maps=getattr(args, "maps", None))


def json_text(doc) -> str:
    """JSON with NaN and ±Inf written as null (plain JSON has no spelling for them)."""
    import json
    import math

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v
    return json.dumps(clean(doc)) + "\n"


def save_experiment(result: dict, out: str | Path, stem: str, plot) -> None:
    """Write an experiment's figure (`plot(result, path)`) and JSON into `out` as STEM.png / STEM.json."""
    from litenet.atomic import atomic_write_text

    out = Path(out)
    make_folder(out)
    drawn = plot(result, out / f"{stem}.png")
    atomic_write_text(out / f"{stem}.json", json_text(result))
    written = [out / f"{stem}.png"] * bool(drawn) + [out / f"{stem}.json"]
    print(f"wrote {' and '.join(map(str, written))} ({result['seconds']} s)")
