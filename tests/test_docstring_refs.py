"""Every Sphinx cross-reference in a docstring of the core and the adapters resolves (issue 37).

What is read: every string statement (module, class, function and attribute docstrings) of
every module of ``permsc_integrations`` and of the three adapters, and in it every Python
role: ``:mod:``, ``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``,
``:obj:``, ``:const:`` (``:py:class:`` alike), ``title <target>``, ``~`` and ``!`` read as
Sphinx reads them (``!``: no reference, nothing to resolve).

Where a target is looked for, in Sphinx's order (``PythonDomain.find_obj``), the context being
the module a docstring is in and the class around it:

* ``name``: as written, then in the module, then in the module's class (``:mod:``: only as
  written, an absolute module); "in the module" is any name the module holds, imported ones
  included (Sphinx would need the object documented there: this test is that much kinder);
* ``.name``: in the class, in the module, then in each package above the module, innermost
  first (Sphinx's search for a suffix, kept to the module's own packages);
* ``..name``: Sphinx strips one dot only, so such a target finds nothing there: it is broken.

A dotted name resolves when its longest importable prefix is a module and the rest is a chain
of attributes (``:mod:`` must end at a module). Where an attribute is not there at run time the
source decides (``ast``): a name bound at a module's top level (an import under
``TYPE_CHECKING`` is followed to its target), a class's annotated field (dataclasses, pydantic
models, protocols), an attribute its methods set on ``self``. Nothing is skipped silently:
``ALLOWED`` holds the exceptions, each with its reason.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (folder that holds the top-level package, the package's folder)
SOURCES = [
    (ROOT, ROOT / "permsc_integrations"),
    (ROOT / "adapters/langchain", ROOT / "adapters/langchain/langchain_permsc"),
    (
        ROOT / "adapters/llama_index",
        ROOT / "adapters/llama_index/llama_index/postprocessor/permsc",
    ),
    (
        ROOT / "adapters/haystack",
        ROOT / "adapters/haystack/haystack_integrations/components/rankers/permsc",
    ),
]
ROLE = re.compile(r":(?:py:)?(mod|class|func|meth|attr|data|exc|obj|const):`([^`]+)`")
# "path:line target" -> why it may stay unresolved. Empty: every reference resolves.
ALLOWED: dict[str, str] = {}
MISSING = object()


@dataclass(frozen=True)
class Ref:
    path: Path
    line: int
    role: str
    target: str  # as written
    module: str
    cls: str | None

    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path.as_posix()}:{self.line}"


def module_files() -> dict[str, Path]:
    """Every module of the core and the adapters by dotted name (a package by its own)."""
    found = {}
    for top, package in SOURCES:
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def refs_in(module: str, path: Path) -> list[Ref]:
    """The roles in every string statement of one module, each with its line and class."""
    source = path.read_text(encoding="utf-8")
    found: list[Ref] = []

    def visit(body: list[ast.stmt], cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                if isinstance(node.value.value, str):
                    text = ast.get_source_segment(source, node.value) or ""
                    for match in ROLE.finditer(text):
                        line = node.value.lineno + text.count("\n", 0, match.start())
                        target = " ".join(match.group(2).split())
                        found.append(Ref(path, line, match.group(1), target, module, cls))
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{cls}.{node.name}" if cls else node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, cls)
            else:
                visit(nested(node), cls)

    visit(ast.parse(source).body, None)
    return found


def nested(node: ast.stmt) -> list[ast.stmt]:
    """The statements inside an ``if``, ``try``, ``with`` or loop."""
    inner = [getattr(node, field, []) for field in ("body", "orelse", "finalbody")]
    inner += [handler.body for handler in getattr(node, "handlers", [])]
    return [stmt for block in inner if isinstance(block, list) for stmt in block]


def all_refs() -> list[Ref]:
    return [ref for module, path in module_files().items() for ref in refs_in(module, path)]


def target_of(written: str) -> str | None:
    """What a role's text points at, Sphinx's way; ``None`` for ``!`` (no reference)."""
    explicit = re.fullmatch(r"(?s).*<(.+)>", written)
    target = explicit.group(1).strip() if explicit else written.lstrip("~")
    return None if target.startswith("!") else target


def candidates(role: str, target: str, module: str, cls: str | None) -> list[str]:
    """The full names a target may mean, in the order they are tried."""
    if target.startswith(".."):
        return []
    if target.startswith("."):
        name = target[1:]
        parts = module.split(".")
        outer = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        inside = [f"{module}.{cls}.{name}"] if cls else []
        return [*inside, *(f"{p}.{name}" for p in outer)]
    if role == "mod":
        return [target]
    inside = [f"{module}.{cls}.{target}"] if cls else []
    return [target, f"{module}.{target}", *inside]


@cache
def imported(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:  # only "no such module": a module that fails otherwise
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None
        raise


@cache
def bindings(path: str, package: str) -> dict[str, str | None]:
    """A module's top-level names (in ``if``/``try`` blocks too): an import's target, or None."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    found: dict[str, str | None] = {}
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try)):
            stack.extend(nested(node))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                found[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                found.update((n.id, None) for n in ast.walk(target) if isinstance(n, ast.Name))
    return found


def class_fields(cls: type) -> set[str]:
    """What instances of ``cls`` carry without the class having it: fields and ``self.x``."""
    names: set[str] = set(getattr(cls, "model_fields", {}) or {})
    for klass in cls.__mro__:
        names.update(vars(klass).get("__annotations__", {}))
        names.update(vars(klass).get("__slots__", ()))
        try:
            tree = ast.parse(inspect.getsource(klass).strip() + "\n")
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return names


def walk(obj: object, rest: list[str]) -> object:
    """``obj.rest[0].rest[1]...``, with the source where run time lacks a name; MISSING if not."""
    for i, name in enumerate(rest):
        try:
            obj = getattr(obj, name)
            continue
        except AttributeError:
            pass
        if isinstance(obj, types.ModuleType) and getattr(obj, "__file__", None):
            package = obj.__name__
            if not obj.__file__.endswith("__init__.py"):
                package = package.rpartition(".")[0]
            bound = bindings(obj.__file__, package)
            if name not in bound:
                return MISSING
            if bound[name] is None:
                return name if i == len(rest) - 1 else MISSING
            found = lookup(bound[name])
            if found is MISSING:
                return MISSING
            obj = found
        elif isinstance(obj, type) and name in class_fields(obj) and i == len(rest) - 1:
            return name
        else:
            return MISSING
    return obj


def lookup(full: str) -> object:
    """The object a full dotted name names, or MISSING."""
    parts = full.split(".")
    for i in range(len(parts), 0, -1):
        module = imported(".".join(parts[:i])) if all(p.isidentifier() for p in parts[:i]) else None
        if module is not None:
            return walk(module, parts[i:])
    return walk(builtins, parts)


def resolve(ref: Ref) -> str | None:
    """The full name ``ref`` resolves to, or None."""
    target = target_of(ref.target)
    if target is None:
        return ref.target
    for full in candidates(ref.role, target, ref.module, ref.cls):
        obj = lookup(full)
        if obj is MISSING:
            continue
        if (ref.role == "mod") != isinstance(obj, types.ModuleType) and ref.role != "obj":
            continue
        return full
    return None


def broken(refs: list[Ref]) -> list[str]:
    """One line per reference that resolves to nothing: ``path:line :role:`target` (context)``."""
    out = []
    for ref in refs:
        if resolve(ref) is None and f"{ref.where()} {ref.target}" not in ALLOWED:
            context = f"{ref.module}.{ref.cls}" if ref.cls else ref.module
            dots = ref.target.lstrip("~").startswith("..")
            hint = " (Sphinx strips one dot only)" if dots else ""
            out.append(f"{ref.where()} :{ref.role}:`{ref.target}` in {context}{hint}")
    return out


# What importing every module of the core and the adapters needs (the README's environment has
# all of it; a floors stage, which installs one distribution on its oldest versions, does not).
NEEDED = ("mcp", "langchain_core", "llama_index.core", "haystack", "langchain_permsc")


def test_every_docstring_reference_resolves() -> None:
    for dependency in NEEDED:
        pytest.importorskip(dependency)
    refs = all_refs()
    assert len(refs) > 500  # the scan reads the docstrings (585 roles when this test was written)
    failures = broken(refs)
    assert not failures, f"{len(failures)} docstring references resolve to nothing:\n" + "\n".join(
        failures
    )


PLANTED = {
    "__init__.py": '"""A package of planted references."""\n',
    "b.py": (
        "from dataclasses import dataclass\n\n\n"
        "@dataclass(frozen=True)\n"
        "class Thing:\n"
        '    """A value: a field with no default is no attribute of the class."""\n\n'
        "    field: int\n"
    ),
    "a.py": '''"""Planted: :class:`~.b.Thing`, :attr:`.b.Thing.field` resolve (a sibling, a field),
:class:`Hidden` too (imported under TYPE_CHECKING only), :func:`sorted` (a builtin);
:mod:`..b` does not (two dots), nor :func:`missing`,
nor :mod:`b` (a module by a name that is not absolute), nor :class:`.b` (a module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planted_refs.b import Thing as Hidden


class Local:
    """:meth:`run` and :attr:`state` resolve in the class; :meth:`Local.stop` does not."""

    def __init__(self) -> None:
        self.state = 1

    def run(self) -> Hidden | None:
        """:meth:`run` again, from the method; :attr:`Thing.field` is not in this module."""
        return None
''',
}


def test_planted_references_resolve_as_sphinx_reads_them(tmp_path, monkeypatch) -> None:
    package = tmp_path / "planted_refs"
    package.mkdir()
    for name, text in PLANTED.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    refs = refs_in("planted_refs.a", package / "a.py")
    resolved = {ref.target: resolve(ref) for ref in refs if resolve(ref)}
    assert resolved == {
        "~.b.Thing": "planted_refs.b.Thing",
        ".b.Thing.field": "planted_refs.b.Thing.field",
        "Hidden": "planted_refs.a.Hidden",
        "sorted": "sorted",
        "run": "planted_refs.a.Local.run",
        "state": "planted_refs.a.Local.state",
    }
    where = f"{(package / 'a.py').as_posix()}"
    assert broken(refs) == [
        f"{where}:3 :mod:`..b` in planted_refs.a (Sphinx strips one dot only)",
        f"{where}:3 :func:`missing` in planted_refs.a",
        f"{where}:4 :mod:`b` in planted_refs.a",
        f"{where}:4 :class:`.b` in planted_refs.a",
        f"{where}:16 :meth:`Local.stop` in planted_refs.a.Local",
        f"{where}:22 :attr:`Thing.field` in planted_refs.a.Local",
    ]
