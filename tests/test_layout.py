"""The core's floor plan: no two modules import each other (nor any longer cycle), function-local
imports included, and docs/architecture.md names every module of the package.

The import graph is read from the source with ``ast``: every ``import`` and ``from ... import``
anywhere in a module (inside functions too, and under ``TYPE_CHECKING``), relative imports
resolved, ``from package import name`` counted as importing the submodule ``name`` when there is
one. import-linter (``.importlinter``, run by ``.ci/run``) checks the direction between layers;
this test checks that nothing is held apart by a function-local import alone.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "permsc_integrations"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """``name`` or the nearest enclosing module that exists (``pkg.mod.attr`` -> ``pkg.mod``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    resolved = {_known(t, known) for t in targets if t.split(".")[0] == PACKAGE.name}
    return {t for t in resolved if t is not None and t != name}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_relative_local_and_package_imports(tmp_path: Path) -> None:
    graph = import_graph()
    assert "permsc_integrations.results" in graph["permsc_integrations.errors"]  # "from .results"
    # function-local ("# lazy: start-up time"), relative to the parent package
    assert "permsc_integrations._ranker.ranker" in graph["permsc_integrations.cli._demo"]
    # "from ..backends.local import model_store" names a submodule (none left in the package:
    # another package's private module is imported through its __init__, test_no_private_import)
    planted = tmp_path / "planted.py"
    planted.write_text("from permsc_integrations.backends.local import _model_store\n")
    models = imports_of("permsc_integrations.cli.planted", planted, modules())
    assert "permsc_integrations.backends.local._model_store" in models


def test_a_planted_cycle_is_found() -> None:
    graph = {name: set(targets) for name, targets in import_graph().items()}
    graph["permsc_integrations.results"].add("permsc_integrations._ranker.ranker")
    assert any("permsc_integrations._ranker.ranker" in c for c in cycles(graph))


def test_no_two_modules_import_each_other() -> None:
    graph = import_graph()
    pairs = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in graph[b]})
    assert pairs == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_architecture_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        rel
        for path in sorted(PACKAGE.rglob("*.py"))
        if f"`{(rel := path.relative_to(PACKAGE).as_posix())}`" not in text
    ]
    assert missing == []


def _local_import_groups(tree: ast.Module) -> list[list[ast.stmt]]:
    """Runs of consecutive import statements inside functions."""
    groups = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for holder in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(holder, field, None)
                if not isinstance(body, list):  # an IfExp's orelse is an expression
                    continue
                run: list[ast.stmt] = []
                for stmt in [*body, None]:
                    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        run.append(stmt)
                    elif run:
                        groups.append(run)
                        run = []
    return groups


def test_every_function_local_import_says_why() -> None:
    """Function-local imports are kept only for optional dependencies and start-up time, with a
    ``# lazy: reason`` line just above them."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for group in _local_import_groups(ast.parse("\n".join(lines))):
            above = lines[group[0].lineno - 2].strip()
            if not above.startswith("# lazy: "):
                unexplained.append(f"{path.relative_to(ROOT)}:{group[0].lineno}")
    assert unexplained == []


def _layout_counts() -> ModuleType:
    """scripts/layout_counts.py, whose rule the issue's count uses (one declaration of it)."""
    spec = importlib.util.spec_from_file_location(
        "layout_counts", ROOT / "scripts" / "layout_counts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_of_another_packages_private_module() -> None:
    """Core and adapters: a package's ``_private`` module is imported only inside that package;
    others import what its ``__init__`` exports (the adapters: permsc_integrations.integration).
    The root's own private modules and folders (``_checks``, ``_run``, ...) are the core's."""
    found = _layout_counts().counts()["imports of another package's private module"]
    assert found == []


def test_the_private_import_rule_catches_one(tmp_path: Path) -> None:
    rule = _layout_counts()
    cli = ROOT / "permsc_integrations" / "cli" / "planted.py"
    adapter = ROOT / "adapters" / "langchain" / "langchain_permsc" / "planted.py"
    core = (
        "from permsc_integrations.serve._config import Limits\nimport permsc_integrations.serve\n"
    )
    assert rule.private_imports(cli, ast.parse(core)) == ["permsc_integrations.serve._config"]
    shared = "from permsc_integrations._checks import at_least\n"
    assert rule.private_imports(cli, ast.parse(shared)) == []  # the core's shared internals
    assert rule.private_imports(adapter, ast.parse(shared)) == ["permsc_integrations._checks"]
    declared = "from permsc_integrations.integration import HomeLoop, at_least\n"
    assert rule.private_imports(adapter, ast.parse(declared)) == []
