"""The re-pack's counts (issue 37), measured on the tree: ``python scripts/layout_counts.py``.

Root modules, forwarding modules, import-linter layers, imports of another package's private
module (core and adapters), the run layer's imports of a strategy's module, long modules and
functions, ``Any`` and ``type: ignore``. Prints one line per count; ``--json`` for a record.
"""

from __future__ import annotations

import ast
import configparser
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "permsc_integrations"
STRATEGY_MODULES = "permsc_integrations.strategies._"  # a strategy's own module, not the protocol
ADAPTERS = [ROOT / "adapters" / name for name in ("langchain", "llama_index", "haystack")]


def _sources() -> list[Path]:
    found = sorted(CORE.rglob("*.py"))
    for adapter in ADAPTERS:
        found += sorted(p for p in adapter.rglob("*.py") if "tests" not in p.parts)
    return [p for p in found if ".mypy_cache" not in p.parts]


def _module(path: Path) -> str:
    inside = [a for a in ADAPTERS if path.is_relative_to(a)]
    base = inside[0] if inside else CORE.parent
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.Module, module: str, is_init: bool) -> list[str]:
    package = module if is_init else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.append(target)
            names += [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def private_imports(path: Path, tree: ast.Module) -> list[str]:
    """Imports of a ``_private`` module of another package: one inside a package that does not
    hold the importer. The root's own private modules and folders (``_checks``, ``_run``, ...)
    are the core's shared internals; an adapter may import none of them."""
    module = _module(path)
    in_core = module.startswith("permsc_integrations")
    bad = []
    for target in _imported(tree, module, path.name == "__init__.py"):
        parts = target.split(".")
        if parts[0] != "permsc_integrations":
            continue
        private = [i for i, part in enumerate(parts) if part.startswith("_") and i > 0]
        if not private or private[0] == 1 and in_core:
            continue
        owner = ".".join(parts[: private[0]])
        if not (module == owner or module.startswith(owner + ".")):
            bad.append(target)
    return sorted({t for t in bad if _exists(t)})


def _exists(target: str) -> bool:
    """Whether ``target`` is a module (not a name imported from one)."""
    base = CORE.parent / Path(*target.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def counts() -> dict[str, object]:
    root_modules = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    declared = config["importlinter:contract:layers"]["layers"].split("\n")
    layers = [line for line in declared if line.strip()]
    long_modules: list[str] = []
    long_functions: list[str] = []
    privates: list[str] = []
    forwarding: list[str] = []
    run_strategy: list[str] = []
    anys = ignores = 0
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        lines = text.count("\n")
        rel = path.relative_to(ROOT).as_posix()
        if lines >= 380:
            long_modules.append(f"{rel}:{lines}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 40:
                    long_functions.append(f"{rel}:{node.name}:{length}")
            if getattr(node, "id", None) == "Any" or getattr(node, "attr", None) == "Any":
                anys += 1
        ignores += text.count("type: ignore")
        privates += [f"{rel} -> {t}" for t in private_imports(path, tree)]
        if "moved(" in text or "DeprecationWarning" in text and "forward" in text:
            forwarding.append(rel)
        if rel.startswith("permsc_integrations/_run/"):
            targets = _imported(tree, _module(path), path.name == "__init__.py")
            run_strategy += [f"{rel} -> {t}" for t in targets if t.startswith(STRATEGY_MODULES)]
    return {
        "root modules (besides __init__)": root_modules,
        "forwarding modules": forwarding,
        "import-linter layers": len(layers),
        "imports of another package's private module": privates,
        "_run imports of a strategy's module": sorted(set(run_strategy)),
        "modules of 380 lines or more": long_modules,
        "functions over 40 lines": long_functions,
        "Any": anys,
        "type: ignore": ignores,
    }


if __name__ == "__main__":
    found = counts()
    if "--json" in sys.argv:
        sys.stdout.write(json.dumps(found, indent=1) + "\n")
    else:
        for name, value in found.items():
            joined = "" if isinstance(value, int) else ", ".join(map(str, value))
            listed = value if isinstance(value, int) else f"{len(value)}  {joined}"
            sys.stdout.write(f"{name}: {str(listed)[:600]}\n")
