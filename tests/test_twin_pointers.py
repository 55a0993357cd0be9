"""Names in prose resolve: every `litenet.X.Y` a kernel header or a doc names (a kernel's NumPy twin, a
module, a function) exists, and every `docs/decisions.md, "Topic"` a comment points to is a heading
there — so the pointers cannot rot when code moves (docs/conventions.md, "Kernels")."""

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOTTED = re.compile(r"\blitenet(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# `decisions.md, "A"`, `decisions.md](…) ("A", "B" and "C")`: the quoted names after the file's name.
DECISIONS_REF = re.compile(r'decisions\.md(?:\]\([^)]*\))?[,:]?\s*\(?\s*((?:"[^"]+"(?:\s*,\s*|\s+and\s+)?)+)')
COMMENT_BREAK = re.compile(r"\s*\n\s*(?://|#)?\s*")  # a comment continued on the next line


def _texts(patterns) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for pattern in patterns for p in sorted(ROOT.glob(pattern))}


@lru_cache(maxsize=None)
def _module_names(path: Path) -> dict[str, set[str]]:
    """Top-level names of a module, each class with the names defined in its body."""
    names = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = {n.name for n in getattr(node, "body", [])
                                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Name):
                    names[target.id] = set()
    return names


def resolves(dotted: str, root: Path = ROOT) -> bool:
    """Whether `litenet.a.b.c` names a module of the package, or a function, class, constant or method
    in one — read from the source, so nothing is imported (no CuPy needed)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:split])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not module.is_file():
            continue
        rest = parts[split:]
        if not rest:
            return True
        names = _module_names(module)
        if rest[0] not in names:
            return False
        return len(rest) == 1 or (len(rest) == 2 and rest[1] in names[rest[0]])
    return False


def test_the_resolver_tells_a_moved_function_from_a_present_one():
    assert resolves("litenet.ops.linear_forward")
    assert resolves("litenet.train.optim.adamw_update")
    assert resolves("litenet.runtime.int8_plan.Plan.product")
    assert resolves("litenet.ops")
    assert not resolves("litenet.train.optim.linear_forward")  # lives in litenet.ops
    assert not resolves("litenet.ops.no_such_function")
    assert not resolves("litenet.no_such_module.forward")


KERNEL_TEXTS = _texts(["kernels/*.cu", "kernels/*.cuh"])
DOC_TEXTS = _texts(["docs/*.md", "README.md", "bench/results/*.md"])


def test_every_kernel_file_names_its_twin_in_full():
    unnamed = [name for name, text in KERNEL_TEXTS.items()
               if name.endswith(".cu") and not DOTTED.search(text.split("\n\n", 1)[0])]
    assert not unnamed, f"kernel files whose header names no litenet.… twin: {unnamed}"


@pytest.mark.parametrize("source", sorted(KERNEL_TEXTS) + sorted(DOC_TEXTS))
def test_every_dotted_name_resolves(source):
    text = KERNEL_TEXTS.get(source) or DOC_TEXTS[source]
    missing = sorted({name for name in DOTTED.findall(text) if not resolves(name)})
    assert not missing, f"{source} names what does not exist: {missing}"


def test_every_pointer_into_the_decisions_log_names_a_heading():
    headings = {line[3:].strip() for line in (ROOT / "docs/decisions.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("## ")}
    sources = _texts(["kernels/*.cu", "kernels/*.cuh", "litenet/**/*.py", "tests/**/*.py", "bench/*.py",
                      "models/*.toml", "docs/*.md", "bench/results/*.md"])
    sources.pop(str(Path(__file__).resolve().relative_to(ROOT)), None)  # this file's own examples
    cited = {}
    for name, text in sources.items():
        for group in DECISIONS_REF.findall(COMMENT_BREAK.sub(" ", text)):
            for topic in re.findall(r'"([^"]+)"', group):
                cited.setdefault(topic, set()).add(name)
    assert cited, "no pointer into docs/decisions.md found: the pattern no longer matches the sources"
    unknown = {topic: sorted(files) for topic, files in cited.items() if topic not in headings}
    assert not unknown, f"pointers to headings docs/decisions.md does not have: {unknown}"
