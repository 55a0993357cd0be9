"""Every install hint names LiteNet's own distribution: the PyPI name `litenet` is an unrelated project."""

import re
import subprocess

from cli_runs import REPO
from litenet.distribution import DISTRIBUTION, install_hint

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# `pip install litenet` (then a space, quote or end) and `litenet[extra]`: both would reach the other project.
WRONG = re.compile(r"\binstall +['\"]?litenet(?![-_\w])|['\"]litenet\[\w[\w,-]*\]")
SUFFIXES = {".py", ".md", ".toml", ".sh", ".js", ".html", ".txt", ".cfg", ".ipynb"}


def tracked_files():
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return [REPO / n for n in names if (REPO / n).suffix in SUFFIXES or n.endswith("Makefile")]


def test_pyproject_names_the_distribution_and_keeps_the_commands():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION != "litenet"
    assert set(project["scripts"]) == {"litenet", "litenet-infer"}
    for extra, requirements in project["optional-dependencies"].items():  # extras that include extras
        for req in requirements:
            assert not req.startswith("litenet[") and not req.startswith("litenet "), (extra, req)


def test_no_install_hint_names_the_other_project():
    found = []
    for path in tracked_files():
        if path.name == "test_install_hints.py" or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if WRONG.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_pattern_catches_the_old_hints():
    for bad in ("pip install litenet", "pip install 'litenet[train]'", 'pip install "litenet[video]"',
                "install litenet[cuda12]", "studio = [\"litenet[train,export]\"]"):
        assert WRONG.search(bad), bad
    for good in (install_hint(), install_hint("train"), "pip install litenet_nn-0.1.0-py3-none-any.whl",
                 "pip install -e \".[train,cuda12]\"", "litenet-infer photo.jpg"):
        assert not WRONG.search(good), good


def test_hints_are_built_from_the_name():
    assert install_hint() == f"pip install {DISTRIBUTION}"
    assert install_hint("cuda12") == f"pip install '{DISTRIBUTION}[cuda12]'"
