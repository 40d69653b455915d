"""Write permsc_integrations/_options/keywords.py from the one declaration of the options.

``RankingOptions`` (permsc_integrations/_options/options.py) declares every ranking option once: its
name, its type, its default, its check, its help and, where a caller may give more than the
field keeps (``adaptive=True``), the type of what may be given (``accepts=``). Python's type
checkers cannot read a class built at run time, so the two typed views of the options that
callers see are written out here, as source, from that declaration:

- ``RankingKeywords``, a TypedDict: the keywords of ``PSCRanker(...)`` and ``RankingOptions(...)``;
- ``OptionFields``: the same as fields, which the adapters' pydantic models get, so that mypy
  reads every adapter option with its type.

Run it after changing the declaration; tests/test_option_keywords.py fails while the written
file is stale, and says so.

    python scripts/generate_option_keywords.py          # write the file
    python scripts/generate_option_keywords.py --check  # exit 1 if the file is stale
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "permsc_integrations" / "_options" / "keywords.py"
WIDTH = 100  # ruff's line length (pyproject.toml)
BUILTIN = {"None", "bool", "int", "float", "str", "dict", "list", "tuple", "set", "object"}

HEAD = '''"""The ranking options as a caller gives them, typed: GENERATED from the declaration
(:class:`~permsc_integrations.RankingOptions`) by
``scripts/generate_option_keywords.py``. Do not edit: change the declaration and run the
script (tests/test_option_keywords.py fails while this file is stale).

- :class:`RankingKeywords`: the keywords of ``PSCRanker(...)`` and ``RankingOptions(...)``.
- :class:`OptionFields`: the same options as fields; the adapters' pydantic models
  (``integration_model.PSCOptionsModel``) get them, so that mypy reads each with its type.

Each type is what the option accepts (``adaptive=True``, ``request_cap="calls=60"``); the
declaration checks the value and keeps its normalised form (``RankingOptions.adaptive`` is an
``Adaptive`` or None). Defaults are the declaration's (docs/options.md).
"""

from __future__ import annotations

'''

BODY = '''
if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["RankingKeywords", "OptionFields"]

_C = TypeVar("_C", bound=type)

_DECLARED: Any = None
"""Stands for the declared default of each field of :class:`OptionFields`."""


@dataclass_transform(kw_only_default=True)
def _fields(cls: _C) -> _C:
    """Marks :class:`OptionFields` as fields for type checkers; changes nothing at run time."""
    return cls


class RankingKeywords(TypedDict, total=False):
    """``PSCRanker``'s and ``RankingOptions``' keywords, in declaration order, each with what it
    accepts (docs/options.md)."""

{keywords}

@_fields
class OptionFields:
    """Every option as a field with what it accepts and its declared default (the adapters'
    pydantic models get these fields: ``integration_model.PSCOptionsModel``)."""

{fields}'''


def _imports_of(module: ModuleType) -> dict[str, str]:
    """``{name: module it is imported from}`` for every ``from X import name`` at the top of
    ``module``'s source (relative modules keep their dots)."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            source = "." * node.level + (node.module or "")
            for alias in node.names:
                found[alias.asname or alias.name] = source
    return found


def _type_text(field: dataclasses.Field[object], namespace: Mapping[str, object]) -> str:
    """What the option accepts, as source: its ``accepts`` type by the name the declaration
    gives it, else the field's own annotation."""
    accepts = field.metadata["accepts"]
    if accepts is None:
        return str(field.type)
    names = [name for name, value in namespace.items() if value is accepts]
    if not names:
        raise SystemExit(f"{field.name}: accepts= must be a type named in _options/options.py")
    return names[0]


def _names_in(text: str) -> set[str]:
    without_strings = re.sub(r"(['\"]).*?\1", "", text)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", without_strings)) - BUILTIN


def _sort_key(name: str) -> tuple[int, str]:
    """ruff's isort order: CONSTANTS, then Classes, then functions and variables."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _import_line(source: str, names: set[str]) -> str:
    listed = sorted(names, key=_sort_key)
    line = f"from {source} import {', '.join(listed)}"
    if len(line) <= WIDTH:
        return line
    return f"from {source} import (\n" + "".join(f"    {n},\n" for n in listed) + ")"


def _import_block(wanted: dict[str, str]) -> str:
    stdlib: dict[str, set[str]] = {"typing": {"Any", "TypedDict", "TypeVar"}}
    local: dict[str, set[str]] = {}
    for name, source in wanted.items():
        own = source.startswith((".", "permsc_integrations"))
        (local if own else stdlib).setdefault(source, set()).add(name)
    first = ["import sys"] + [_import_line(s, stdlib[s]) for s in sorted(stdlib)]
    second = [_import_line(s, local[s]) for s in sorted(local)]
    return "\n".join(first) + "\n\n" + "\n".join(second) + "\n"


def _docstring(text: str) -> str:
    wrapped = textwrap.wrap(text, width=WIDTH - 10, break_on_hyphens=False)
    return "    " + '"""' + "\n    ".join(wrapped) + '"""'


def render(options: type, module: ModuleType) -> str:
    """The source of _option_keywords.py for the declaration ``options`` (a dataclass like
    RankingOptions) defined in ``module``."""
    namespace = vars(module)
    imported = _imports_of(module)
    keywords, fields, wanted = [], [], {}
    for field in dataclasses.fields(options):
        text = _type_text(field, namespace)
        for name in _names_in(text):
            if name not in imported:
                where = "_options/options.py"
                raise SystemExit(f"{field.name}: {name} must be imported by name in {where}")
            wanted[name] = imported[name]
        keywords.append(f"    {field.name}: {text}\n{_docstring(field.metadata['help'])}\n")
        fields.append(f"    {field.name}: {text} = _DECLARED\n")
    body = BODY.replace("{keywords}", "".join(keywords)).replace("{fields}", "".join(fields))
    return HEAD + _import_block(wanted) + body


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from permsc_integrations._options import options

    source = render(options.RankingOptions, options)
    if "--check" in argv:
        if TARGET.read_text() == source:
            return 0
        script = Path(__file__).relative_to(ROOT)
        sys.stderr.write(f"{TARGET.relative_to(ROOT)} is stale: run python {script}\n")
        return 1
    TARGET.write_text(source)
    sys.stdout.write(f"wrote {TARGET.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
