"""The packages' shape: imports run one way, with no cycle among the project's modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "worker", "webui", "cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """Project modules `path` imports, at any depth of its code (lazy imports count too).

    ``from package import module`` is an arrow to that module; ``from module import name``
    one to the module that defines the name.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module in known and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return found


def _graph() -> dict[str, set[str]]:
    paths = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    known = {_module_name(path) for path in paths}
    return {_module_name(path): _imports(path, known) - {_module_name(path)} for path in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_project_modules() -> None:
    assert _cycles(_graph()) == []


def test_shared_imports_neither_the_worker_nor_the_web() -> None:
    graph = _graph()
    backwards = {
        module: sorted(t for t in targets if t.startswith(("worker", "webui", "cli")))
        for module, targets in graph.items()
        if module.startswith("shared")
    }
    assert {module: targets for module, targets in backwards.items() if targets} == {}


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_cli_imports_only_shared() -> None:
    """`signoff` starts the worker and the web as processes; it never imports them."""
    graph = _graph()
    reaching = {
        module: sorted(t for t in targets if t.startswith(("worker", "webui")))
        for module, targets in graph.items()
        if module.startswith("cli")
    }
    assert {module: targets for module, targets in reaching.items() if targets} == {}


def test_the_worker_and_the_web_import_neither_each_other_nor_the_cli() -> None:
    graph = _graph()
    crossing = {
        module: sorted(
            t
            for t in targets
            if t.startswith("cli") or t.split(".")[0] not in ("shared", module.split(".")[0])
        )
        for module, targets in graph.items()
        if module.startswith(("worker", "webui"))
    }
    assert {module: targets for module, targets in crossing.items() if targets} == {}


def test_every_package_says_what_lives_there() -> None:
    """Each folder opens with the one line that tells a newcomer what it holds."""
    silent = [
        str(init.relative_to(ROOT))
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert silent == []


def test_no_module_name_repeats_its_folder_as_a_prefix() -> None:
    """A feature's modules live in its folder (`webui/batches/bar.py`), not side by side as
    `batch_bar.py`, `batch_input.py`: three or more modules sharing a prefix is a folder."""
    crowded = []
    for package in PACKAGES:
        for folder in [ROOT / package, *(ROOT / package).rglob("*/")]:
            if not (folder / "__init__.py").exists():
                continue
            prefixes: dict[str, list[str]] = {}
            for module in folder.glob("*_*.py"):
                prefixes.setdefault(module.stem.split("_")[0], []).append(module.stem)
            crowded += [sorted(names) for names in prefixes.values() if len(names) >= 3]
    assert crowded == []


def test_domain_enums_and_models_live_in_the_models_package() -> None:
    """Where people look for `BatchState` or `Role`: `shared/models/`, not beside a store."""
    misplaced = [
        f"{path.relative_to(ROOT)}:{node.name}"
        for path in (ROOT / "shared" / "store").rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and base.id == "Enum" for base in node.bases)
    ]
    assert misplaced == []
