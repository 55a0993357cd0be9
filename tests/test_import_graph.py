"""The litenet package's import graph: no cycles, and the runtime reaches nothing of train, export or insight.

Every module is parsed (not imported) and every `litenet.*` import counted, including those inside
functions: a lazy import is still a dependency, only a later one.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "litenet"
# The runtime alone is what a Raspberry Pi installs (docs/conventions.md): it may not reach these.
NOT_FOR_RUNTIME = ("litenet.train", "litenet.export", "litenet.insight")


def module_names() -> dict[str, Path]:
    """Dotted name → file, for every module of the package."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _resolve(name: str, modules) -> str | None:
    """The module an imported dotted name lives in: itself, or the nearest enclosing module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules) -> set[str]:
    """The litenet modules that `module` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from litenet.train import network` imports the module litenet.train.network
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "litenet" or target.startswith("litenet."):
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != module:
                    found.add(resolved)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, …, a], or None (depth-first search, colouring the nodes)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` reaches, each with the module that imports it on one path there."""
    seen, todo = {start: ""}, [start]
    while todo:
        node = todo.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen[nxt] = node
                todo.append(nxt)
    return seen


def test_the_graph_is_built_from_every_module():
    graph = import_graph()
    assert "litenet.cli" in graph and "litenet.train.run" in graph
    assert "litenet.train.run" in graph["litenet.train.parallel.launch"]  # a lazy import counts too


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_no_cycle_between_the_folders():
    """train is below insight and export; a module of one importing the other's would tie them."""
    modules = import_graph()
    folders: dict[str, set[str]] = {}
    for module, targets in modules.items():
        folder = ".".join(module.split(".")[:2])
        folders.setdefault(folder, set()).update(".".join(t.split(".")[:2]) for t in targets)
    for folder, targets in folders.items():
        targets.discard(folder)
    cycle = find_cycle(folders)
    if cycle:  # name the module imports behind each edge of the cycle
        lines = []
        for a, b in zip(cycle, cycle[1:]):
            why = sorted(f"{m} imports {t}" for m, ts in modules.items() if m.startswith(a + ".")
                         for t in ts if t.startswith(b + "."))
            lines.append(f"{a} → {b}: {'; '.join(why)}")
        raise AssertionError("import cycle between folders:\n" + "\n".join(lines))


def test_runtime_reaches_nothing_of_train_export_or_insight():
    graph = import_graph()
    bad = []
    for module in sorted(m for m in graph if m == "litenet.runtime" or m.startswith("litenet.runtime.")):
        via = reachable(graph, module)
        for target in sorted(via):
            if target.startswith(NOT_FOR_RUNTIME):
                path, node = [target], target
                while via[node]:
                    node = via[node]
                    path.append(node)
                bad.append(" → ".join(reversed(path)))
    assert not bad, "the runtime imports what a Raspberry Pi does not install:\n" + "\n".join(bad)
